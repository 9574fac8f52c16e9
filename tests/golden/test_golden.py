"""The renderers' output, byte for byte, at a fixed width and a fixed clock.

A change to a table, the Markdown or the HTML page shows up here as a diff to read.
After an intended change: ``HOPTRACE_UPDATE_GOLDEN=1 pytest tests/golden`` rewrites the
files in ``expected/``; review them with ``git diff`` before committing.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from tests.synthetic import MS, SEED_MS, chain_trace
from tracer.analysis import TraceSet, analyze, compare, exemplar_waterfalls, what_if
from tracer.analysis.checks.budget import Limit, check_budget
from tracer.analysis.render import (
    Report,
    analysis_sections,
    bench_sections,
    budget_text,
    comparison_sections,
    split_analysis_sections,
    to_html,
    to_markdown,
    to_table,
    whatif_sections,
)
from tracer.analysis.split import split_by
from tracer.bench import BenchResult, LevelResult, Sample, find_knee

EXPECTED = Path(__file__).parent / "expected"
UPDATE = os.environ.get("HOPTRACE_UPDATE_GOLDEN") == "1"
T0 = 1_760_000_000_000_000_000
CLOCK = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
WIDTH = 110


def _traces(inference_ms: float, first: int) -> TraceSet:
    traces = TraceSet()
    for i in range(12):
        ms = {**SEED_MS, "inference": inference_ms + 10 * i, "auth": 60.0 + (i % 5) * 20}
        traces.add(
            chain_trace(
                f"{first + i:032x}",
                T0 + (first + i) * 5000 * MS,
                ms,
                model_ttft_ms=150.0,
                tokens=(700, 120),
                engine_ms=(5.0 + i, 145.0 - i, inference_ms * 0.7),
                model="llama-3-8b" if i % 3 else "mistral-7b",
            )
        )
    return traces


@pytest.fixture(scope="module", params=["on", "off", "compiled-off"])
def batches(request):
    """Every golden output three times: with the batches (``on``), with the scalar path
    alone (``HOPTRACE_BATCH=off``), and with the batches but the Python twins of the
    compiled per-trace steps (as ``HOPTRACE_NATIVE=off``); all must give the same bytes."""
    from tracer.analysis.attribution import words

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOPTRACE_BATCH", "off" if request.param == "off" else "on")
        if request.param == "compiled-off":
            patch.setenv("HOPTRACE_NATIVE", "off")
            patch.setattr(words, "_compiled_words", None)  # as read at import with it off
            patch.setattr(words, "_compiled_earliest", None)
        yield request.param


@pytest.fixture(scope="module")
def runs(batches):
    base, cand = _traces(1000.0, 1), _traces(10.0, 101)
    return base, cand, analyze(base), analyze(cand)


def _bench() -> BenchResult:
    levels = []
    for n, (c, e2e) in enumerate(((1, 100.0), (2, 120.0), (4, 260.0))):
        samples = [
            Sample(f"{n:02x}{i:030x}", "200", e2e + i, 20.0 + i, (5.0, 6.0), 8) for i in range(10)
        ]
        samples.append(Sample("f" * 32, "503", 3.0, None, (), 0))
        levels.append(LevelResult(c, f"bench-golden-c{c}", samples, wall_s=2.0))
    result = BenchResult("http://127.0.0.1:8000/v1", 64, True, "bench-golden", levels)
    result.knee = find_knee(levels)
    result.notes.append("gateway grew by 150.0 ms per request (mean) from concurrency 1 to 4")
    return result


def _check(name: str, text: str) -> None:
    path = EXPECTED / name
    if UPDATE:
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} is missing; HOPTRACE_UPDATE_GOLDEN=1 writes it"
    assert text == path.read_text(encoding="utf-8")


def test_analysis_table_matches_the_golden_text(runs):
    _, _, base, _ = runs
    _check("analysis.txt", to_table(analysis_sections(base, {"*": (0.5, 1.5)}), width=WIDTH))


def test_analysis_markdown_matches_the_golden_text(runs):
    _, _, base, _ = runs
    _check("analysis.md", to_markdown(analysis_sections(base)))


def test_whatif_and_compare_tables_match_the_golden_text(runs):
    base_traces, _, base, cand = runs
    sections = whatif_sections(what_if(base_traces, "inference", 100))
    sections += comparison_sections(compare(base, cand))
    _check("whatif_compare.txt", to_table(sections, width=WIDTH))


def test_bench_and_budget_text_match_the_golden_text(runs):
    _, _, base, _ = runs
    budget = check_budget(
        base,
        [Limit("e2e", "p90_ms", 1500.0), Limit("stage.inference", "share_max", 0.5)],
    )
    _check(
        "bench_budget.txt", to_table(bench_sections(_bench()), width=WIDTH) + budget_text(budget)
    )


def test_split_by_model_matches_the_golden_text(runs):
    base_traces, _, _, _ = runs
    parts = split_by(base_traces, "gen_ai.request.model", analyze)
    _check("split.md", to_markdown(split_analysis_sections(parts)[:1]))


def test_html_report_matches_the_golden_page(runs):
    base_traces, cand_traces, base, cand = runs
    page = Report(
        title="golden",
        source="synthetic seed chain",
        analysis=cand,
        whatif=what_if(base_traces, "inference", 100),
        comparison=compare(base, cand),
        bench=_bench(),
        split=split_by(cand_traces, "gen_ai.request.model", analyze),
        waterfalls=exemplar_waterfalls(cand, cand_traces)
        + [
            w
            for w in exemplar_waterfalls(base, base_traces, projection=("inference", 100))
            if w.note
        ],
        jaeger_url="http://jaeger.example:16686",
        generated_at=CLOCK,
    )
    html = to_html(page)
    assert "2026-11-30 12:00 UTC" in html
    _check("report.golden.html", html)


def test_a_sampled_analysis_and_its_budget_match_the_golden_text(batches):
    # The same traces kept by a 10% sampler: every figure an estimate with its interval.
    import msgspec

    sampled = TraceSet()
    for spans in _traces(1000.0, 1).traces.values():
        sampled.add([msgspec.structs.replace(s, trace_state="ot=th:e666") for s in spans])
    a = analyze(sampled)
    budget = check_budget(
        a,
        [
            Limit("e2e", "p90_ms", 3000.0),  # met: the whole interval is under it
            Limit("e2e", "p50_ms", 1650.0),  # inside the interval: undecided
            Limit("stage.inference", "share_max", 0.5),  # exceeded
        ],
    )
    _check("sampled.txt", to_table(analysis_sections(a), width=WIDTH) + budget_text(budget))
