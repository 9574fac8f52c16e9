"""The critical-path test cases of Jaeger UI and Uber's CRISP (``../shared/peer_cases``):
hoptrace's per-span and per-operation critical time equals each peer's answer, exactly or
through a difference ``docs/analysis.md`` documents for that case."""

from __future__ import annotations

import json
import os
from pathlib import Path

import orjson
import pytest

from tests.conftest import REPO
from tests.helpers import hoptrace, skip_or_fail
from tracer.analysis import analyze_sources, load
from tracer.analysis.model.critical_path import trace_times
from tracer.analysis.model.prepare import prepare
from tracer.analysis.query import Query
from tracer.spans.model import KIND_CONSUMER, KIND_PRODUCER, Warnings

CASES = Path(os.environ.get("HOPTRACE_PEER_CASES", REPO.parent / "shared" / "peer_cases"))
US = 1_000

#: Cases where hoptrace differs from the peer on purpose (docs/analysis.md, "The peers'
#: test cases"): "skew" — hoptrace shifts a remote child that does not fit its parent
#: (the peer truncates or drops it), so the peer's own walk on the shifted trace is the
#: answer; "one owner" — CRISP gives two sequential siblings that overlap (within its
#: 1% tolerance) both the overlap, and the parent less; hoptrace gives each instant to
#: one span, the later sibling.
DIFFERENCES = {
    "crisp-07": "skew",
    "crisp-08": "skew",
    "crisp-10": "one owner",
    "crisp-19": "one owner",
    "crisp-20": "one owner",
    "crisp-21": "one owner",
}


def _names() -> list[str]:
    if not CASES.is_dir():
        return []
    return sorted(p.name[: -len(".expected.json")] for p in CASES.glob("*.expected.json"))


@pytest.fixture
def cases_dir() -> Path:
    if not CASES.is_dir():
        skip_or_fail(
            f"peer critical-path cases not found at {CASES}: put the project's "
            "shared/peer_cases folder beside the checkout or set HOPTRACE_PEER_CASES"
        )
    return CASES


def _jaeger_walk(spans, start, end, parent) -> dict[int, int]:
    """Jaeger UI's critical path (CriticalPath/index.ts at the commit the cases name),
    transcribed: non-blocking PRODUCER -> CONSUMER subtrees pruned, children truncated
    to their parent or dropped, then the walk into the last-finishing child and back
    to the child that finished strictly before the returning child's start."""
    n = len(spans)
    children: list[list[int]] = [[] for _ in range(n)]
    root = parent.index(-1)
    order = [root]
    for i in order:
        for c in range(n):
            if parent[c] == i and not (
                spans[i].kind == KIND_PRODUCER and spans[c].kind == KIND_CONSUMER
            ):
                children[i].append(c)
                order.append(c)
    s, e = list(start), list(end)
    kept = set(order)
    for c in order[1:]:  # parents first, as the span map's insertion order
        p = parent[c]
        if p not in kept or s[c] >= e[p] or e[c] <= s[p]:
            kept.discard(c)
            if p in kept:
                children[p].remove(c)
            continue
        s[c], e[c] = max(s[c], s[p]), min(e[c], e[p])
    own: dict[int, int] = {}

    def last_finishing(i: int, before: int | None) -> int | None:
        best = None
        for c in children[i]:
            if (before is None or e[c] < before) and (best is None or e[c] > e[best]):
                best = c
        return best

    span, returning = root, None
    while span is not None:
        lfc = last_finishing(span, returning)
        section_end = returning if returning is not None else e[span]
        if lfc is not None:
            own[span] = own.get(span, 0) + section_end - e[lfc]
            span, returning = lfc, None
        else:
            own[span] = own.get(span, 0) + section_end - s[span]
            span, returning = (parent[span] if span != root else None), s[span]
    return {i: t for i, t in own.items() if t}


def _hoptrace(trace_file: Path):
    (trace_id, spans), = load([str(trace_file)]).traces.items()  # fmt: skip
    issues = Warnings()
    prepared = prepare(trace_id, spans, issues)
    assert prepared is not None
    return prepared, issues


def _expected(case: dict, prepared, issues) -> dict[str, float]:
    """The peer's answer per span (its own names), through the case's documented
    difference."""
    by_id = {v: k for k, v in case["span_ids"].items()}
    if case["peer"] == "jaeger-ui":
        peer = dict(case["expected_span_us"])
    else:
        peer = dict(case["crisp_computed"]["spans"])
    kind = DIFFERENCES.get(case["case"])
    if kind == "skew":
        assert issues.skew_adjusted > 0, "the documented difference is the skew shift"
        walked = _jaeger_walk(prepared.spans, prepared.start, prepared.end, prepared.parent)
        peer = {by_id[prepared.spans[i].span_id]: t / US for i, t in walked.items()}
    elif kind == "one owner":
        info = case["spans"]
        path = case["crisp_computed"]["critical_path"]
        for name in path:
            parent = next((r[1] for r in info[name]["references"]), None)
            siblings = sorted(
                (k for k in path if any(r[1] == parent for r in info[k]["references"])),
                key=lambda k: info[k]["start"],
            )
            at = siblings.index(name) if parent is not None else -1
            if 0 <= at < len(siblings) - 1:
                later = info[siblings[at + 1]]
                overlap = info[name]["start"] + info[name]["duration"] - later["start"]
                assert overlap > 0, "the documented difference is an overlap"
                peer[name] -= overlap
                peer[parent] = peer.get(parent, 0) + overlap
    return {k: float(v) for k, v in peer.items() if v}


@pytest.mark.parametrize("name", _names() or ["(no cases)"])
def test_critical_time_per_span_matches_the_peer(cases_dir, name):
    case = json.loads((cases_dir / f"{name}.expected.json").read_text())
    prepared, issues = _hoptrace(cases_dir / f"{name}.trace.json")
    by_id = {v: k for k, v in case["span_ids"].items()}
    got = {by_id[prepared.spans[i].span_id]: t / US for i, t in trace_times(prepared).items()}
    assert got == _expected(case, prepared, issues)
    # Each instant to one span: the critical times sum to the trace's end to end.
    assert sum(got.values()) == prepared.e2e_ns / US


@pytest.mark.parametrize("name", _names() or ["(no cases)"])
def test_critical_time_per_operation_matches_the_peer(cases_dir, name):
    case = json.loads((cases_dir / f"{name}.expected.json").read_text())
    trace_file = cases_dir / f"{name}.trace.json"
    prepared, issues = _hoptrace(trace_file)
    result, _ = analyze_sources([str(trace_file)], Query(group_by="operation", workers=1))
    got = {g.name: round(g.mean_ms * 1000, 3) for g in result.groups if g.mean_ms}
    want: dict[str, float] = {}
    for span, t in _expected(case, prepared, issues).items():
        info = case["spans"][span]
        key = f"{info['service']}: {info['operation']}"
        want[key] = want.get(key, 0.0) + t
    assert got == want
    if case["peer"] == "crisp" and name not in DIFFERENCES:
        stated = {k: v for k, v in case["expected_group_us"].items() if v}
        assert got == stated  # CRISP's own stated expectation, not only its output


def test_every_documented_difference_is_a_case_and_in_the_docs(cases_dir):
    names = set(_names())
    assert set(DIFFERENCES) <= names
    assert len(names) == 42
    docs = (REPO / "docs" / "analysis.md").read_text()
    for name in DIFFERENCES:
        assert f"`{name}`" in docs, f"{name} is not explained in docs/analysis.md"


def test_the_cli_reads_a_peer_case_as_a_user_would(cases_dir):
    proc = hoptrace(
        "analyze",
        str(cases_dir / "jaeger-ui-test2.trace.json"),
        "--group-by",
        "operation",
        "--format",
        "json",
    )
    assert proc.returncode == 0, proc.stderr
    groups = {g["name"]: g["mean_ms"] for g in orjson.loads(proc.stdout)["groups"]}
    # C started while A still ran: C did not wait for A, which gets nothing.
    assert groups == {"service1: op1": 0.06, "service1: op3": 0.04}
