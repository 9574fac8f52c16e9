"""The text output explains itself: a parent row says it is the stage's own time, empty
sub-stages are left out, one way to write ratios, whole token counts, no wrapped
commands, and no Jaeger link unless one is configured."""

from __future__ import annotations

import re

import orjson
import pytest

from tests.helpers import hoptrace
from tests.synthetic import SEED_MS, chain_trace, to_otlp_json
from tracer.analysis import TraceSet, analyze, compare
from tracer.analysis.render import analysis_sections, comparison_sections, to_table

T0 = 1_760_000_000_000_000_000
MS = 1_000_000


def _traces(inference_ms: float, engine_ms, first: int = 1) -> TraceSet:
    traces = TraceSet()
    for i in range(10):
        ms = {**SEED_MS, "inference": inference_ms}
        traces.add(
            chain_trace(
                f"{first + i:032x}",
                T0 + (first + i) * 5000 * MS,
                ms,
                tokens=(66, 32),
                engine_ms=engine_ms,
            )
        )
    return traces


def test_the_parent_row_is_own_time_and_the_family_total_matches_the_stage_selection():
    a = analyze(_traces(1000.0, (5.0, 200.0, 700.0)))
    text = to_table(analysis_sections(a))
    assert "│ inference (own time) │" in text
    family = sum(g.share for g in a.groups if g.name.split(".")[0] == "inference")
    assert (
        f"inference with its sub-stages (what --stage inference selects): "
        f"{family * 100:.1f}% of the critical path"
    ) in text


def test_a_sub_stage_no_trace_spends_time_in_is_left_out_and_said_so():
    a = analyze(_traces(1000.0, (0.01, 200.0, 700.0)))  # a queue of 10 µs: nothing to show
    assert "inference.queue" in {g.name for g in a.groups}
    text = to_table(analysis_sections(a))
    assert "↳ inference.queue" not in text
    assert "left out: inference.queue (no measurable time in any trace)" in text


def test_token_counts_are_whole_and_ratios_are_written_one_way():
    base, cand = _traces(1000.0, None), _traces(10.0, None, first=101)
    text = to_table(analysis_sections(analyze(base)))
    assert "66 input and 32 output tokens per request" in text
    c = compare(analyze(base), analyze(cand))
    lines = to_table(comparison_sections(c))
    ratio = 1 / c.e2e_ratio["p50"]
    assert f"({ratio:.2f}x faster)" in lines
    assert not re.search(r"\(x\d", lines)


def test_long_notes_are_one_line_each_at_any_width():
    a = analyze(_traces(1000.0, (5.0, 200.0, 700.0)))
    text = to_table(analysis_sections(a), width=60)
    note = next(line for line in text.splitlines() if "inference with its sub-stages" in line)
    assert note.endswith("ms mean")  # not cut at 60 columns
    assert "Network hops (time in CLIENT spans outside the remote server)" in text


@pytest.fixture
def trace_file(tmp_path):
    path = tmp_path / "t.jsonl"
    lines = [orjson.dumps(to_otlp_json(chain_trace(f"{i:032x}", T0 + i * MS))) for i in (1, 2)]
    path.write_bytes(b"\n".join(lines))
    return path


def test_no_jaeger_link_unless_a_jaeger_is_configured(trace_file, tmp_path):
    plain = hoptrace("analyze", str(trace_file))
    assert plain.returncode == 0, plain.stderr
    assert "Jaeger" not in plain.stdout and "16686" not in plain.stdout
    linked = hoptrace("analyze", str(trace_file), "--jaeger-url", "http://jaeger.example:16686")
    assert "(open http://jaeger.example:16686/trace/<id> in Jaeger)" in linked.stdout
    page = tmp_path / "r.html"
    assert hoptrace("report", str(trace_file), "-o", str(page)).returncode == 0
    assert "open in Jaeger" not in page.read_text()
