"""The dependency model (docs/analysis.md, the dependency model): what each rule makes
of a trace, and that analyze and whatif tell one story: a span's critical-path time is
what finishing it sooner saves, on random trees."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracer.analysis import TraceSet, analyze, what_if
from tracer.analysis.model.critical_path import trace_dependencies, trace_times
from tracer.analysis.model.dependencies import critical_sections, critical_times, tolerance_ns
from tracer.analysis.model.prepare import prepare
from tracer.spans.model import (
    KIND_CLIENT,
    KIND_CONSUMER,
    KIND_INTERNAL,
    KIND_PRODUCER,
    KIND_SERVER,
    Span,
    Warnings,
)

T0 = 1_760_000_000_000_000_000
US = 1_000


def _span(sid, parent, start_us, end_us, service="svc", kind=KIND_INTERNAL, stage=None):
    return Span(
        "ab" * 16,
        f"{sid:016x}",
        None if parent is None else f"{parent:016x}",
        service,
        f"op{sid}",
        kind,
        T0 + start_us * US,
        T0 + end_us * US,
        stage,
    )


def _critical_us(spans: list[Span]) -> dict[int, float]:
    prepared = prepare(spans[0].trace_id, spans, Warnings())
    assert prepared is not None
    return {int(prepared.spans[i].span_id, 16): t / US for i, t in trace_times(prepared).items()}


def _saved_us(spans: list[Span], target: int, speedup: float) -> float:
    """End-to-end time saved by ``whatif`` when span ``target`` alone is faster."""
    staged = [
        msgspec.structs.replace(s, stage="target" if int(s.span_id, 16) == target else "rest")
        for s in spans
    ]
    traces = TraceSet()
    traces.add(staged)
    result = what_if(traces, "target", speedup)
    return (result.before.p50 - result.after.p50) * 1000


def test_a_sibling_still_running_when_the_next_starts_is_not_waited_for():
    # Jaeger UI's test2: X 1-101, A 10-50, C 20-60. C started while A ran.
    spans = [_span(1, None, 1, 101), _span(2, 1, 10, 50), _span(3, 1, 20, 60)]
    assert _critical_us(spans) == {1: 60.0, 3: 40.0}
    assert _saved_us(spans, 2, 1000) == 0.0
    # C twice as fast ends at 40, but A runs to 50: the hidden sibling becomes critical.
    assert _saved_us(spans, 3, 2) == pytest.approx(10.0)


def test_an_overlap_within_the_tolerance_is_clock_error_and_goes_to_the_later_sibling():
    # CRISP's case 19: 5 us overlaps in a 600 us parent (under 1%): sequential calls.
    spans = [
        _span(1, None, 0, 600),
        _span(2, 1, 10, 210),
        _span(3, 1, 205, 305),
        _span(4, 1, 300, 600),
    ]
    assert _critical_us(spans) == {1: 10.0, 2: 195.0, 3: 95.0, 4: 300.0}
    assert _saved_us(spans, 3, 1.01) == pytest.approx(95.0 * (1 - 1 / 1.01))
    assert _saved_us(spans, 2, 1.01) == pytest.approx(195.0 * (1 - 1 / 1.01))


def test_the_tolerance_is_one_percent_of_the_parent_from_1_us_to_1_ms():
    assert tolerance_ns(50 * US) == 1 * US  # 1% would be 0.5 us: the floor
    assert tolerance_ns(600 * US) == 6 * US
    assert tolerance_ns(10_000_000 * US) == 1_000 * US  # 1% would be 100 ms: the cap
    # CRISP's case 14: a 5 us overlap in an 80 us parent is more than 1%: in parallel.
    spans = [
        _span(1, None, 0, 80),
        _span(2, 1, 10, 30),
        _span(3, 1, 20, 45),
        _span(4, 1, 40, 65),
    ]
    assert _critical_us(spans) == {1: 35.0, 2: 20.0, 4: 25.0}


def test_a_consumer_does_not_hold_its_producer_up():
    # Jaeger UI's test5: the producer gets its whole time, the consumer nothing.
    spans = [
        _span(1, None, 1, 31, kind=KIND_PRODUCER),
        _span(2, 1, 10, 20, kind=KIND_CONSUMER),
        _span(3, 2, 12, 14),
    ]
    assert _critical_us(spans) == {1: 30.0}
    assert _saved_us(spans, 2, 100) == 0.0


def test_a_child_waits_for_every_earlier_sibling_not_only_the_latest():
    # A fan-out joined: a 0-60 and b 0-80 both before c 90-100 in a 0-100 parent.
    spans = [
        _span(1, None, 0, 100),
        _span(2, 1, 0, 60),
        _span(3, 1, 0, 80),
        _span(4, 1, 90, 100),
    ]
    assert _critical_us(spans) == {1: 10.0, 3: 80.0, 4: 10.0}
    # b 4x faster ends at 20; c still waits for a (60): 20 us saved, not 60.
    assert _saved_us(spans, 3, 4) == pytest.approx(20.0)


def test_a_longer_remote_child_streaming_past_its_client_widens_it():
    # The CLIENT span ended at the response headers; the server streamed on.
    spans = [
        _span(1, None, 0, 1000, service="app"),
        _span(2, 1, 100, 200, service="app", kind=KIND_CLIENT),
        _span(3, 2, 110, 900, service="model", kind=KIND_SERVER),
    ]
    issues = Warnings()
    prepared = prepare(spans[0].trace_id, spans, issues)
    assert prepared is not None and issues.skew_adjusted == 0
    assert prepared.end[1] == T0 + 900 * US
    assert _critical_us(spans) == {1: 200.0, 2: 10.0, 3: 790.0}


def test_a_shorter_remote_child_ending_after_its_client_is_clock_skew():
    # Shorter than its CLIENT parent, it would fit: centred, not taken as a stream.
    spans = [
        _span(1, None, 0, 1000, service="app"),
        _span(2, 1, 100, 300, service="app", kind=KIND_CLIENT),
        _span(3, 2, 250, 350, service="model", kind=KIND_SERVER),
    ]
    issues = Warnings()
    prepared = prepare(spans[0].trace_id, spans, issues)
    assert prepared is not None and issues.skew_adjusted == 1
    assert prepared.end[1] == T0 + 300 * US
    assert (prepared.start[2], prepared.end[2]) == (T0 + 150 * US, T0 + 250 * US)


_KINDS = [KIND_INTERNAL, KIND_CLIENT, KIND_SERVER, KIND_PRODUCER, KIND_CONSUMER]


@st.composite
def _trees(draw) -> list[Span]:
    """Random traces on a microsecond grid: sequential siblings that touch, overlap a
    little (around the tolerance) or a lot, parallel ones, remote children with skew
    or streaming past their CLIENT parent, producers and consumers."""
    n = draw(st.integers(2, 10))
    root_us = draw(st.integers(50, 20_000))
    spans = [_span(1, None, 0, root_us, service="s0", kind=KIND_SERVER)]
    info = [(0, root_us, "s0")]  # start, end, service
    kids: dict[int, list[int]] = {0: []}
    for i in range(1, n):
        p = draw(st.integers(0, i - 1))
        p_start, p_end, p_service = info[p]
        room = max(p_end - p_start, 1)
        siblings = kids.setdefault(p, [])
        mode = draw(st.sampled_from(["inside", "after", "after", "parallel", "skew"]))
        if mode == "after" and siblings:
            before = info[siblings[draw(st.integers(0, len(siblings) - 1))]]
            tol = max(tolerance_ns(room * US) // US, 1)
            start = before[1] + draw(st.integers(-3 * tol, 3 * tol))
        elif mode == "parallel" and siblings:
            start = info[siblings[-1]][0]
        elif mode == "skew":
            start = p_start + draw(st.integers(-room // 2, room))
        else:
            start = p_start + draw(st.integers(0, room))
        length = draw(st.integers(0, room))
        remote = draw(st.booleans())
        service = f"s{i}" if remote else p_service
        kind = draw(st.sampled_from(_KINDS))
        spans.append(_span(i + 1, p + 1, start, start + length, service=service, kind=kind))
        info.append((start, start + length, service))
        siblings.append(i)
        kids[i] = []
    return spans


def _choice_margin(spans: list[Span]) -> float:
    """The smallest gap (ns) between the latest and the next end at any choice the walk
    makes (the child that ended last, the sibling a child waited for last); 0 when two
    tie: then the critical path is not unique."""
    prepared = prepare(spans[0].trace_id, spans, Warnings())
    assert prepared is not None
    deps = trace_dependencies(prepared)
    margins = []
    for p, kids in enumerate(deps.kids):
        if len(kids) > 1:
            ends = sorted((deps.hi[c] for c in kids), reverse=True)
            margins.append(ends[0] - ends[1])
        joined: list[int] = []
        for j, c in enumerate(kids):
            if p in deps.tangled:
                joined.extend(deps.joins.get(c, ()))
            elif j:  # a plain sequence: each waits for every kid before it
                joined.append(kids[j - 1])
            if len(joined) > 1:
                ends = sorted((deps.hi[a] for a in joined), reverse=True)
                margins.append(ends[0] - ends[1])
    return float(min(margins, default=float("inf")))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_trees())
def test_a_spans_critical_time_is_what_finishing_it_sooner_saves(spans):
    critical = _critical_us(spans)
    prepared = prepare(spans[0].trace_id, spans, Warnings())
    assert prepared is not None
    expected: dict[str, float] = {}
    for i, s in enumerate(prepared.spans):
        name = "network" if prepared.stage[i] == "network" else f"{s.service}: {s.name}"
        expected[name] = expected.get(name, 0.0) + critical.get(int(s.span_id, 16), 0.0)
    traces = TraceSet()
    traces.add(spans)
    analysis = analyze(traces, group_by="operation")
    got = {g.name: g.mean_ms * 1000 for g in analysis.groups}
    assert got == pytest.approx({k: v for k, v in expected.items() if v}, abs=1e-6)
    margin_us = _choice_margin(spans) / US
    for s in spans:
        sid = int(s.span_id, 16)
        t = critical.get(sid, 0.0)
        for k in (1.01, 2.0, 10.0, 1000.0):  # never more than its critical time
            assert _saved_us(spans, sid, k) <= t * (1 - 1 / k) + 1e-6
        if t > 0 and margin_us > 0:
            # A speedup small enough that no choice of the walk can flip: the path stays.
            e = min(0.01, margin_us / (2 * t))
            saved = _saved_us(spans, sid, 1 + e)
            assert saved == pytest.approx(t * (1 - 1 / (1 + e)), abs=1e-6)  # to the ns


@settings(max_examples=80, deadline=None)
@given(_trees())
def test_the_critical_sections_tile_the_trace_and_sum_to_the_critical_times(spans):
    prepared = prepare(spans[0].trace_id, spans, Warnings())
    assert prepared is not None
    deps = trace_dependencies(prepared)
    sections = critical_sections(deps)
    # Back to back from the root's start to its end: every instant, once.
    cursor = prepared.start[prepared.root]
    for _, a, b in sections:
        assert a == cursor and b > a
        cursor = b
    assert cursor == max(prepared.end[prepared.root], prepared.start[prepared.root])
    per_span: dict[int, int] = {}
    for i, a, b in sections:
        per_span[i] = per_span.get(i, 0) + b - a
    assert per_span == critical_times(deps)
