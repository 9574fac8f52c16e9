"""Waterfall layout: the critical path each bar holds, and the projected waterfall."""

from __future__ import annotations

import re

import pytest

from tests.synthetic import SEED_MS, chain_trace
from tracer.analysis import TraceSet, analyze, exemplar_waterfalls, what_if
from tracer.analysis.model.prepare import prepare
from tracer.analysis.render import Report, to_html
from tracer.analysis.render.sections import shown_groups
from tracer.analysis.render.svg import legend, nice_step, stage_colour, waterfall_svg
from tracer.analysis.whatif.waterfall import projected_waterfall, waterfall
from tracer.spans.model import Warnings

T0 = 1_760_000_000_000_000_000
MS = 1_000_000


def _prepared(ms: dict[str, float] | None = None):
    spans = chain_trace("a" * 32, T0, ms or SEED_MS)
    trace = prepare("a" * 32, spans, Warnings(), None)
    assert trace is not None
    return trace


def _traces(n: int = 10) -> TraceSet:
    traces = TraceSet()
    for i in range(n):
        ms = {**SEED_MS, "inference": 1000.0 + 10 * i}
        traces.add(chain_trace(f"{i + 1:032x}", T0 + i * 5000 * MS, ms))
    return traces


def test_critical_sections_of_all_rows_tile_the_trace_end_to_end():
    wf = waterfall(_prepared(), "P50")
    sections = sorted(s for row in wf.rows for s in row.critical)
    assert sum(b - a for a, b in sections) == pytest.approx(wf.e2e_ms, abs=1e-6)
    assert sections[0][0] == pytest.approx(0.0)
    assert sections[-1][1] == pytest.approx(wf.e2e_ms)
    for (_, end), (start, _) in zip(sections, sections[1:], strict=False):
        assert start == pytest.approx(end, abs=1e-6)  # no instant twice, none left out
    for row in wf.rows:  # each span's stretches lie inside its own bar
        for a, b in row.critical:
            assert row.start_ms - 1e-6 <= a < b <= row.end_ms + 1e-6


def test_the_inference_span_holds_its_whole_length_on_the_path_and_the_root_little():
    wf = waterfall(_prepared(), "P50")
    by_stage = {row.stage: row for row in wf.rows if not row.gaps}
    inference = by_stage["inference"]
    assert inference.critical_ms == pytest.approx(inference.end_ms - inference.start_ms)
    root = wf.rows[0]
    assert root.critical_ms == pytest.approx(SEED_MS["client"])
    assert root.end_ms - root.start_ms == pytest.approx(1600.0)


def test_projected_waterfall_ends_where_the_what_if_retimes_the_trace():
    trace = _prepared()
    projected = projected_waterfall(trace, "projected", "inference", 100)
    # The seed story: 600 ms outside the model, 1000 ms of inference -> 610 ms.
    assert projected.e2e_ms == pytest.approx(610.0, abs=0.01)
    sections = [s for row in projected.rows for s in row.critical]
    assert sum(b - a for a, b in sections) == pytest.approx(610.0, abs=0.01)
    inference = [r for r in projected.rows if r.stage == "inference"][-1]  # the model's
    assert inference.end_ms - inference.start_ms == pytest.approx(10.0, abs=0.01)
    assert "inference 100x faster" in projected.note


def test_exemplar_waterfalls_add_the_projection_at_the_exemplars_scale():
    traces = _traces()
    result = analyze(traces)
    measured, projected = exemplar_waterfalls(result, traces, projection=("inference", 10))[:2]
    assert not measured.note and projected.note
    assert projected.trace_id == measured.trace_id
    assert projected.scale_ms == pytest.approx(measured.e2e_ms)
    assert projected.e2e_ms < measured.e2e_ms


@pytest.mark.parametrize(
    ("span", "step"), [(1640.4, 500.0), (551.9, 100.0), (20000, 5000), (7, 2), (0.3, 0.05)]
)
def test_axis_steps_are_one_two_or_five_times_a_power_of_ten(span, step):
    assert nice_step(span) == pytest.approx(step)
    assert span / nice_step(span) <= 6


def test_waterfall_svg_prints_round_ticks_durations_and_the_critical_path():
    svg = waterfall_svg(waterfall(_prepared(), "P50"), 0)
    ticks = re.findall(r'text-anchor="(?:start|end)">([\d,.]+) ms</text>', svg)
    assert ticks == ["0", "500", "1,000", "1,500"]
    assert ">1,600.0 ms (60.0 on the path)</text>" in svg  # the root, mostly waiting
    assert ">1,000.0 ms</text>" in svg  # inference, all of it on the path
    assert svg.count('class="critical"') == svg.count('class="critical-line"') > 5
    # The whole bar outlined in its stage's colour under the critical stretches, not a
    # faded fill (a faded inference bar would read as inference.queue's lighter shade).
    inference = stage_colour("inference")
    assert f'fill="#ffffff" stroke="{inference}"' in svg
    assert 'fill-opacity="0.35"' not in svg.replace('fill="url(#net-0)" fill-opacity', "")


def test_legends_follow_the_canonical_stage_order_and_name_every_pattern():
    html = legend(["network", "inference.decode", "auth", "inference", "client"])
    names = re.findall(r"</i>([^<]+)</span>", html)
    assert names == ["client", "auth", "inference", "inference.decode", "network"]
    traces = _traces()
    result = analyze(traces)
    page = to_html(
        Report(
            title="t",
            analysis=result,
            whatif=what_if(traces, "inference", 100),
            waterfalls=exemplar_waterfalls(result, traces, projection=("inference", 100)),
        )
    )
    for key in ("network span, while the service it calls runs", "off the critical path"):
        assert key in page
    legends = re.findall(r'<div class="legend">(.*?)</div>', page)
    stage_lists = [
        [n for n in re.findall(r"</i>([^<]+)</span>", x) if " " not in n] for x in legends
    ]
    order = [
        "client",
        "gateway",
        "auth",
        "context",
        "inference",
        "postprocess",
        "return",
        "network",
    ]
    for names in stage_lists:
        assert names == [n for n in order if n in names]


def test_whatif_after_bar_is_labelled_with_shares_of_the_new_total():
    traces = _traces()
    w = what_if(traces, "inference", 100)
    page = to_html(Report(title="t", whatif=w))
    start = page.index('id="whatif-bars"')
    after = page[page.index(">inference 100x<", start) : page.index("</svg>", start)]
    pattern = r'data-group="([^"]+)"><title>[^<]*</title></rect><text[^>]*>(\d+)%</text>'
    labels = dict(re.findall(pattern, after))
    # 180 ms of network in a trace of about 615 ms after: 29%, as the text says (not
    # 11%, its share of the old total).
    assert labels["network"] == f"{dict(w.after_groups)['network'] * 100:.0f}"
    assert 28 <= int(labels["network"]) <= 30
    assert f"network {labels['network']}%" in page


def test_an_engine_phase_of_no_time_is_neither_drawn_nor_in_the_legend():
    """An engine that reports a queue it did not use: the tables leave
    ``inference.queue`` out, and so does the page (no 0.0 ms row, no legend entry)."""
    traces = TraceSet()
    for i in range(5):
        traces.add(
            chain_trace(
                f"{i + 1:032x}", T0 + i * 5000 * MS, SEED_MS, engine_ms=(0.02, 140.0, 700.0)
            )
        )
    result = analyze(traces)
    assert shown_groups(result)[1] == ["inference.queue"]  # the tables' "left out"
    (p50, *_) = exemplar_waterfalls(result, traces)
    stages = [row.stage for row in p50.rows]
    assert "inference.prefill" in stages and "inference.decode" in stages
    assert "inference.queue" not in stages and p50.hidden == 0
    page = to_html(Report(title="t", analysis=result, waterfalls=[p50]))
    assert 'data-stage="inference.queue"' not in page and "</i>inference.queue<" not in page


def test_a_sub_stage_left_out_of_both_runs_is_not_in_the_comparison_legend():
    def runs(first: int, inference_ms: float) -> TraceSet:
        traces = TraceSet()
        for i in range(5):
            ms = {**SEED_MS, "inference": inference_ms}
            engine = (0.02, 140.0, inference_ms * 0.7)  # an engine queue it never used
            traces.add(
                chain_trace(f"{first + i:032x}", T0 + (first + i) * 5000 * MS, ms, engine_ms=engine)
            )
        return traces

    from tracer.analysis import compare

    page = to_html(
        Report(title="t", comparison=compare(analyze(runs(1, 1000.0)), analyze(runs(101, 10.0))))
    )
    card = page[page.index('id="compare"') :]
    card = card[: card.index("</section>")]
    names = re.findall(r"</i>([^<]+)</span>", card)
    assert "inference.decode" in names and "inference.queue" not in names
