"""One self-contained HTML report: share bars, percentile table, waterfalls.

Everything is inline (CSS, SVG); the page makes no request of its own, so it works
offline and can be attached to a ticket. Links to Jaeger are plain ``<a href>``s that
fetch nothing until clicked. The computation is done before: the tables come from the
same :class:`Section` objects as the text and Markdown, the waterfalls from
:mod:`tracer.analysis.whatif.waterfall`; the page's timestamp is data (``generated_at``).

    page = Report(title="checkout chain", analysis=result)
    page.waterfalls = exemplar_waterfalls(result, traceset)
    Path("report.html").write_text(to_html(page))
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Collection
from dataclasses import dataclass, field
from html import escape
from typing import TYPE_CHECKING

from tracer.analysis.aggregate import Analysis, Stats
from tracer.analysis.checks.compare import Comparison
from tracer.analysis.checks.cost import Prices
from tracer.analysis.model.substages import canonical
from tracer.analysis.render.bench import bench_sections
from tracer.analysis.render.links import trace_url
from tracer.analysis.render.sections import (
    Section,
    analysis_sections,
    comparison_sections,
    fmt_in,
    fmt_ms,
    groups_section,
    hops_section,
    row_name,
    sample_note,
    shown_groups,
    warnings_note,
    whatif_sections,
)
from tracer.analysis.render.split import split_summary
from tracer.analysis.render.svg import (
    WATERFALL_KEYS,
    legend,
    line_chart,
    stacked_bars,
    stage_colour,
    waterfall_svg,
)
from tracer.analysis.split import Split
from tracer.analysis.table.schema import SUMMARIES, Column
from tracer.analysis.whatif.retime import WhatIf
from tracer.analysis.whatif.waterfall import Waterfall

if TYPE_CHECKING:  # tracer.bench imports httpx: not for every report
    from tracer.bench import BenchResult

__all__ = ["Report", "to_html"]


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


@dataclass
class Report:
    """What one page shows; every part but the title is optional."""

    title: str
    source: str = ""
    analysis: Analysis | None = None
    whatif: WhatIf | None = None
    comparison: Comparison | None = None
    bench: BenchResult | None = None
    split: Split[Analysis] | None = None
    waterfalls: list[Waterfall] = field(default_factory=list)
    #: the Jaeger UI the trace ids link to (none: no links)
    jaeger_url: str = ""
    #: token prices per 1,000 (``--price``): the Tokens lines add the cost per request
    prices: Prices = field(default_factory=dict)
    generated_at: _dt.datetime = field(default_factory=_now)


_CSS = """
:root { --ink: #1d2330; --muted: #5b6475; --line: #d9dde5; --paper: #ffffff; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
       color: var(--ink); background: #f4f6f9; }
main { max-width: 1180px; margin: 0 auto; padding: 24px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 0 0 12px; }
.meta { color: var(--muted); margin-bottom: 18px; }
.card { background: var(--paper); border: 1px solid var(--line); border-radius: 8px;
        padding: 16px 18px; margin-bottom: 18px; }
.headline { font-size: 17px; font-weight: 600; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { padding: 4px 8px; border-bottom: 1px solid var(--line); text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { color: var(--muted); font-weight: 600; }
.swatch { display: inline-block; width: 11px; height: 11px; border-radius: 2px;
          margin-right: 6px; vertical-align: -1px; }
.legend { font-size: 12px; }
.legend span { margin-right: 14px; white-space: nowrap; }
.notes li { color: var(--muted); }
a { color: #0b5cad; }
.warn { border-color: #e0b100; }
svg text { font: 12px system-ui, sans-serif; fill: var(--ink); }
svg.chart, svg.waterfall { max-width: 100%; height: auto; }
@media (max-width: 900px) { main { padding: 10px; } .card { padding: 12px; } }
svg text.on-bar { paint-order: stroke; stroke: #fff; stroke-width: 3px; }
"""


def _table(section: Section, table_id: str, swatches: bool | Collection[str] = False) -> str:
    """A :class:`Section`'s table as HTML: the same rows the text and Markdown show.

    ``swatches``: a colour swatch before every row's name, or only before the names in
    the given collection (the group rows of a table that has other rows too).
    """
    head = "".join(f"<th>{escape(h)}</th>" for h in section.headers)
    rows = []
    for row in section.rows:
        first = escape(row[0])
        name = row_name(row[0])
        if swatches is True or (not isinstance(swatches, bool) and name in swatches):
            colour = stage_colour(name)
            first = f'<i class="swatch" style="background:{colour}"></i>{first}'
        cells = "".join(f"<td>{escape(c)}</td>" for c in row[1:])
        rows.append(f"<tr><td>{first}</td>{cells}</tr>")
    return f'<table id="{table_id}"><tr>{head}</tr>{"".join(rows)}</table>'


def _notes(notes: list[str], headline: bool = False) -> str:
    css = ' class="headline"' if headline else ""
    return "".join(f"<p{css}>{escape(n)}</p>" for n in notes)


def _share_card(a: Analysis) -> str:
    # Stages in request order, sub-stages after their parent: the legends' order too.
    by_stage = a.group_by == "stage"
    ordered = canonical(shown_groups(a)[0], lambda g: g.name) if by_stage else list(a.groups)
    names = [g.name for g in ordered]
    bars = [
        (
            "all time",
            [(g.name, g.share) for g in ordered],
            f"{a.traces} traces, P50 {fmt_ms(a.e2e.p50)} ms",
        ),
        (
            "tail (>= P90)",
            [(g.name, g.tail_share) for g in ordered],
            f"P90 {fmt_ms(a.e2e.p90)} ms",
        ),
    ]
    if any(g.ttft_share is not None for g in a.groups) and a.ttft is not None:
        bars.append(
            (
                "first token",
                [(g.name, g.ttft_share or 0.0) for g in ordered],
                f"TTFT P50 {fmt_ms(a.ttft.p50)} ms",
            )
        )
    return (
        f'<section class="card" id="shares"><h2>Where the time goes, by {escape(a.group_by)}'
        "</h2>" + stacked_bars(bars, "share-bars") + legend(names) + "</section>"
    )


def _split_card(split: Split[Analysis]) -> str:
    table = split_summary(split)
    names: list[str] = []
    for _, _, a in split.parts:
        names += [g.name for g in a.groups if g.name not in names]
    if all(a.group_by == "stage" for _, _, a in split.parts):
        names = canonical(names, lambda n: n)
    bars = []
    for value, n, a in split.parts:
        shares = {g.name: g.share for g in a.groups}
        bars.append(
            (
                value,
                [(name, shares.get(name, 0.0)) for name in names],
                f"{n} traces, P50 {fmt_ms(a.e2e.p50)} ms",
            )  # fmt: skip
        )
    return (
        f'<section class="card" id="split"><h2>{escape(table.title)}</h2>'
        + stacked_bars(bars, "split-bars")
        + legend(names)
        + _table(table, "split-table", swatches=set(names))
        + _notes(table.notes)
        + "</section>"
    )


def _stats_row(c: Column, s: Stats) -> str:
    """A summarised column's row of the totals: its label, n, mean and percentiles."""
    cells = "".join(
        f"<td>{escape(fmt_in(c.fmt, getattr(s, k), s.intervals, k))}</td>"
        for k in ("mean", "p50", "p90", "p99")
    )
    return f"<tr><td>{escape(c.short)}</td><td>{s.n}</td>{cells}</tr>"


def _percentile_card(a: Analysis, prices: Prices) -> str:
    # The summarised columns the page shows, in the unit of the end-to-end time.
    unit = SUMMARIES[0].unit
    shown = [(c, a.summaries.get(c.summary)) for c in SUMMARIES if c.short and c.unit == unit]
    totals = [_stats_row(c, s) for c, s in shown if s is not None]
    hops = hops_section(a)
    sampled = sample_note(a)
    return (
        '<section class="card" id="percentiles"><h2>Percentiles</h2>'
        + ("" if sampled is None else _notes([sampled]))
        + _table(groups_section(a), "groups", swatches=True)
        + '<br><table id="totals"><tr><th></th><th>n</th>'
        + "".join(f"<th>{k} {unit}</th>" for k in ("mean", "P50", "P90", "P99"))
        + "</tr>"
        + "".join(totals)
        + "</table>"
        + ("" if hops is None else "<h2>Network hops</h2>" + _table(hops, "hops"))
        + "".join(
            '<h2>Tokens</h2><div id="tokens">' + _notes(s.notes) + "</div>"
            for s in analysis_sections(a, prices)
            if s.title == "Tokens"
        )
        + "</section>"
    )


def _whatif_card(w: WhatIf, projected: list[Waterfall], jaeger_url: str) -> str:
    # The bars are drawn to scale (the after bar as long as its P50 against the
    # before's); each piece is labelled with its share of its own bar's total, as the
    # share table below says.
    scale = w.after.p50 / w.before.p50 if w.before.p50 > 0 else 0.0
    # Sub-stages with no time before or after (an engine's unused queue) are left out,
    # as in the tables.
    after = dict(w.after_groups)
    before = canonical(
        [(n, s) for n, s in w.before_groups if "." not in n or max(s, after.get(n, 0.0)) >= 0.0005],
        lambda g: g[0],
    )
    bars = [
        ("before", before, f"P50 {fmt_ms(w.before.p50)} ms"),
        (
            f"{w.stage} {w.speedup:g}x",
            [(n, after.get(n, 0.0)) for n, _ in before],
            f"P50 {fmt_ms(w.after.p50)} ms",
        ),
    ]
    speed, shares = whatif_sections(w)[:2]
    drawn = "".join(_waterfall_body(wf, 100 + i, jaeger_url) for i, wf in enumerate(projected))
    if drawn and w.model == "load":
        drawn += _notes(
            [
                "The projected waterfall retimes this one trace on its own; the figures "
                "above also count the queueing the change moves under the run's load."
            ]
        )
    return (
        f'<section class="card" id="whatif"><h2>{escape(speed.title)}</h2>'
        + _notes(speed.notes[:1], headline=True)
        + _notes(
            [
                *speed.notes[1:],
                "Bars are drawn to scale; each part is labelled with its share of its "
                "own bar's total.",
            ]
        )
        + stacked_bars(bars, "whatif-bars", scales=[1.0, scale])
        + legend([n for n, _ in before])
        + _table(speed, "whatif-table")
        + "<br>"
        + _table(shares, "whatif-shares", swatches=True)
        + drawn
        + "</section>"
    )


def _comparison_card(c: Comparison) -> str:
    b, k = c.baseline, c.candidate
    scale = k.e2e.mean / b.e2e.mean if b.e2e.mean > 0 else 0.0
    bars = [
        (
            "baseline",
            canonical([(g.name, g.share) for g in b.groups], lambda p: p[0]),
            f"mean {fmt_ms(b.e2e.mean)} ms",
        ),
        (
            "candidate",
            canonical([(g.name, g.share) for g in k.groups], lambda p: p[0]),
            f"mean {fmt_ms(k.e2e.mean)} ms",
        ),
    ]
    # A sub-stage the tables leave out of both runs is left out of the legend too.
    names = [g.name for g in shown_groups(b)[0]] + [g.name for g in shown_groups(k)[0]]
    table = comparison_sections(c)[0]
    return (
        '<section class="card" id="compare"><h2>Candidate against baseline</h2>'
        + _notes(table.notes, headline=True)
        + stacked_bars(bars, "compare-bars", scales=[1.0, scale])
        + legend(names)
        + _table(table, "compare-table", swatches=True)
        + "</section>"
    )


def _bench_card(bench: BenchResult) -> str:
    measured = bench.levels
    stats = [lv.e2e() if lv.ok else None for lv in measured]
    chart = line_chart(
        [f"c={lv.concurrency}" for lv in measured],
        [
            ("end-to-end P50", "#0072b2", [s.p50 if s else None for s in stats]),
            ("end-to-end P90", "#d55e00", [s.p90 if s else None for s in stats]),
        ],
        "bench-chart",
    )
    table = bench_sections(bench)[0]
    return (
        '<section class="card" id="bench"><h2>'
        f"{escape(table.title)}</h2>"
        + _notes(table.notes[:1], headline=True)
        + chart
        + _table(table, "bench-table")
        + _notes(table.notes[1:])
        + "</section>"
    )


def _waterfall_body(wf: Waterfall, index: int, jaeger_url: str) -> str:
    """A waterfall's heading, trace id (linked when a Jaeger UI is configured), chart
    and legend."""
    opened = ""
    if jaeger_url:
        link = trace_url(jaeger_url, wf.trace_id)
        opened = (
            f' · <a href="{escape(link)}" rel="noreferrer noopener" target="_blank">'
            "open in Jaeger</a>"
        )
    note = f" · {escape(wf.note)}" if wf.note else ""
    return (
        f"<h2>{escape(wf.label)}: {fmt_ms(wf.e2e_ms)} ms end to end</h2>"
        f"<p>trace <code>{escape(wf.trace_id)}</code>{opened}{note}</p>"
        + waterfall_svg(wf, index)
        + (
            f"<p>{wf.hidden} more spans are not drawn; Jaeger shows them all.</p>"
            if wf.hidden
            else ""
        )
        + legend([r.stage for r in wf.rows if not r.gaps], WATERFALL_KEYS)
    )


def _waterfall_card(wf: Waterfall, index: int, jaeger_url: str) -> str:
    return (
        f'<section class="card" id="exemplar-{index}">'
        + _waterfall_body(wf, index, jaeger_url)
        + "</section>"
    )


def _warnings_card(a: Analysis) -> str:
    counts = warnings_note(a)
    if counts is None:
        return ""
    items = "".join(f"<li>{escape(m)}</li>" for m in a.warnings.messages)
    return (
        '<section class="card warn" id="warnings"><h2>Warnings</h2>'
        f'<p>{escape(counts)}</p><ul class="notes">{items}</ul></section>'
    )


def to_html(report: Report) -> str:
    """The whole page as one string (UTF-8, no external resources)."""
    now = report.generated_at.astimezone(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    meta = f"generated by hoptrace {now}"
    if report.source:
        meta += f" from {report.source}"
    body = [f"<h1>{escape(report.title)}</h1>", f'<div class="meta">{escape(meta)}</div>']
    # A projected waterfall is drawn in the what-if view, the measured ones at the end.
    projected = [wf for wf in report.waterfalls if wf.note]
    measured = [wf for wf in report.waterfalls if not wf.note]
    if report.whatif is not None:
        body.append(_whatif_card(report.whatif, projected, report.jaeger_url))
    if report.comparison is not None:
        body.append(_comparison_card(report.comparison))
    if report.bench is not None:
        body.append(_bench_card(report.bench))
    if report.analysis is not None:
        body.append(_share_card(report.analysis))
        if report.split is not None:
            body.append(_split_card(report.split))
        body.append(_percentile_card(report.analysis, report.prices))
    for i, wf in enumerate(measured):
        body.append(_waterfall_card(wf, i, report.jaeger_url))
    if report.analysis is not None:
        body.append(_warnings_card(report.analysis))
    # A Content-Security-Policy that forbids every fetch: the page is self-contained,
    # and a browser enforces it even if a future change slipped in an external URL.
    csp = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>{escape(report.title)}</title><style>{_CSS}</style></head>"
        f"<body><main>{''.join(body)}</main></body></html>\n"
    )
