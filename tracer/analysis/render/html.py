"""One self-contained HTML report: share bars, percentile table, waterfalls.

Everything is inline (CSS, SVG); the page makes no request of its own, so it works
offline and can be attached to a ticket. Links to Jaeger are plain ``<a href>``s that
fetch nothing until clicked.

    page = Report(title="checkout chain", analysis=result)
    page.waterfalls = exemplar_waterfalls(result, traceset)
    Path("report.html").write_text(to_html(page))
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from dataclasses import dataclass, field
from html import escape
from typing import Any

from tracer.analysis.aggregate import Analysis, Stats
from tracer.analysis.compare import Comparison
from tracer.analysis.critical_path import own_times
from tracer.analysis.model import KIND_CLIENT
from tracer.analysis.prepare import PreparedTrace, StageMap, TraceIssues, prepare
from tracer.analysis.render.sections import (
    Section,
    bench_sections,
    comparison_sections,
    fmt_ms,
    groups_section,
    hops_section,
    whatif_sections,
)
from tracer.analysis.traceset import TraceSet
from tracer.analysis.whatif import WhatIf

__all__ = [
    "DEFAULT_JAEGER_URL",
    "Report",
    "Waterfall",
    "WaterfallRow",
    "exemplar_waterfalls",
    "stage_colour",
    "to_html",
    "waterfall",
]

DEFAULT_JAEGER_URL = "http://localhost:16686"

# The seven stages in request order, network and other: colours that stay apart
# for most kinds of colour blindness (Okabe-Ito and neighbours).
STAGE_COLOURS = {
    "client": "#56b4e9",
    "gateway": "#e69f00",
    "auth": "#cc79a7",
    "context": "#009e73",
    "inference": "#d55e00",
    "postprocess": "#0072b2",
    "return": "#b8a000",
    "network": "#9a9a9a",
    "other": "#c8c8c8",
}
_EXTRA = ("#8c564b", "#17becf", "#7f7f7f", "#bcbd22", "#9467bd", "#2ca02c", "#ff7f0e")


def stage_colour(name: str) -> str:
    """A fixed colour per canonical stage; other names get a stable colour of their own."""
    if name in STAGE_COLOURS:
        return STAGE_COLOURS[name]
    digest = hashlib.sha1(name.encode()).digest()
    return _EXTRA[digest[0] % len(_EXTRA)]


@dataclass
class WaterfallRow:
    """One span of a waterfall; times in ms from the root's start."""

    depth: int
    name: str
    service: str
    stage: str
    start_ms: float
    end_ms: float
    critical_ms: float
    gaps: list[tuple[float, float, str]] = field(default_factory=list)


@dataclass
class Waterfall:
    """An exemplar trace laid out for drawing."""

    label: str
    trace_id: str
    e2e_ms: float
    rows: list[WaterfallRow]
    hidden: int = 0  # spans past the row limit


@dataclass
class Report:
    """What one page shows; every part but the title is optional."""

    title: str
    source: str = ""
    analysis: Analysis | None = None
    whatif: WhatIf | None = None
    comparison: Comparison | None = None
    bench: dict[str, Any] | None = None
    waterfalls: list[Waterfall] = field(default_factory=list)
    jaeger_url: str = DEFAULT_JAEGER_URL


# -- waterfalls -------------------------------------------------------------------------


def waterfall(trace: PreparedTrace, label: str, max_rows: int = 60) -> Waterfall:
    """Lay out ``trace``: depth-first from the root, children by start time.

    A network span (a CLIENT span whose child runs in another service) carries the
    stretches its remote children do not cover as ``gaps``: the time on the wire.
    """
    t0 = trace.start[trace.root]
    own = own_times(trace.root, trace.children, trace.start, trace.end)
    rows: list[WaterfallRow] = []
    stack = [(trace.root, 0)]
    while stack and len(rows) < max_rows:
        i, depth = stack.pop()
        span = trace.spans[i]
        row = WaterfallRow(
            depth=depth,
            name=span.name,
            service=span.service,
            stage=trace.stage[i],
            start_ms=(trace.start[i] - t0) / 1e6,
            end_ms=(trace.end[i] - t0) / 1e6,
            critical_ms=own.get(i, 0) / 1e6,
        )
        hop = trace.hop[i]
        if hop is not None and span.kind == KIND_CLIENT:
            remote = [c for c in trace.children[i] if trace.spans[c].service != span.service]
            if remote:
                first = min(trace.start[c] for c in remote)
                last = max(trace.end[c] for c in remote)
                text = f"{hop[0]} -> {hop[1]}"
                if first > trace.start[i]:
                    row.gaps.append((row.start_ms, (first - t0) / 1e6, text))
                if trace.end[i] > last:
                    row.gaps.append(((last - t0) / 1e6, row.end_ms, text))
        rows.append(row)
        kids = sorted(trace.children[i], key=lambda c: trace.start[c], reverse=True)
        stack.extend((c, depth + 1) for c in kids)
    return Waterfall(label, trace.trace_id, trace.e2e_ns / 1e6, rows, len(trace.spans) - len(rows))


def exemplar_waterfalls(
    analysis: Analysis, traceset: TraceSet, stage_map: StageMap | None = None
) -> list[Waterfall]:
    """Waterfalls of the P50 and P90 exemplar traces of ``analysis``."""
    out = []
    seen = set()
    for label, key in (("P50 exemplar", "p50"), ("P90 exemplar", "p90")):
        trace_id = analysis.exemplars.get(key)
        if not trace_id or trace_id in seen or trace_id not in traceset.traces:
            continue
        seen.add(trace_id)
        prepared = prepare(trace_id, traceset.traces[trace_id], TraceIssues(), stage_map)
        if prepared is not None:
            out.append(waterfall(prepared, label))
    return out


# -- drawing ------------------------------------------------------------------------------

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
.legend span { margin-right: 14px; white-space: nowrap; }
.notes li { color: var(--muted); }
a { color: #0b5cad; }
.warn { border-color: #e0b100; }
svg text { font: 12px system-ui, sans-serif; fill: var(--ink); }
"""


def _legend(names: list[str]) -> str:
    items = "".join(
        f'<span><i class="swatch" style="background:{stage_colour(n)}"></i>{escape(n)}</span>'
        for n in names
    )
    return f'<div class="legend">{items}</div>'


def _stacked_bars(
    bars: list[tuple[str, list[tuple[str, float]], str]], css_id: str, width: int = 1100
) -> str:
    """Horizontal stacked bars; each bar is (label, [(group, fraction)], caption)."""
    label_w, caption_w, h, gap = 150, 170, 26, 12
    plot_w = width - label_w - caption_w
    height = len(bars) * (h + gap) + gap
    parts = [
        f'<svg id="{css_id}" class="chart" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">'
    ]
    for row, (label, pieces, caption) in enumerate(bars):
        y = gap + row * (h + gap)
        parts.append(f'<text x="0" y="{y + h * 0.68:.1f}">{escape(label)}</text>')
        x = float(label_w)
        for name, frac in pieces:
            w = max(0.0, frac) * plot_w
            if w <= 0:
                continue
            parts.append(
                f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{h}" '
                f'fill="{stage_colour(name)}" data-group="{escape(name)}">'
                f"<title>{escape(name)}: {frac * 100:.1f}%</title></rect>"
            )
            if w > 44:
                parts.append(
                    f'<text x="{x + 4:.2f}" y="{y + h * 0.68:.1f}" style="fill:#fff">'
                    f"{frac * 100:.0f}%</text>"
                )
            x += w
        parts.append(
            f'<text x="{label_w + plot_w + 10}" y="{y + h * 0.68:.1f}">{escape(caption)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _table(section: Section, table_id: str, swatches: bool = False) -> str:
    """A :class:`Section`'s table as HTML: the same rows the text and Markdown show."""
    head = "".join(f"<th>{escape(h)}</th>" for h in section.headers)
    rows = []
    for row in section.rows:
        first = escape(row[0])
        if swatches:
            first = f'<i class="swatch" style="background:{stage_colour(row[0])}"></i>{first}'
        cells = "".join(f"<td>{escape(c)}</td>" for c in row[1:])
        rows.append(f"<tr><td>{first}</td>{cells}</tr>")
    return f'<table id="{table_id}"><tr>{head}</tr>{"".join(rows)}</table>'


def _notes(notes: list[str], headline: bool = False) -> str:
    css = ' class="headline"' if headline else ""
    return "".join(f"<p{css}>{escape(n)}</p>" for n in notes)


def _share_card(a: Analysis) -> str:
    names = [g.name for g in a.groups]
    bars = [
        (
            "all time",
            [(g.name, g.share) for g in a.groups],
            f"{a.traces} traces, P50 {fmt_ms(a.e2e.p50)} ms",
        ),
        (
            "tail (>= P90)",
            [(g.name, g.tail_share) for g in a.groups],
            f"P90 {fmt_ms(a.e2e.p90)} ms",
        ),
    ]
    if any(g.ttft_share is not None for g in a.groups) and a.ttft is not None:
        bars.append(
            (
                "first token",
                [(g.name, g.ttft_share or 0.0) for g in a.groups],
                f"TTFT P50 {fmt_ms(a.ttft.p50)} ms",
            )
        )
    return (
        f'<section class="card" id="shares"><h2>Where the time goes, by {escape(a.group_by)}'
        "</h2>" + _stacked_bars(bars, "share-bars") + _legend(names) + "</section>"
    )


def _stats_row(label: str, s: Stats) -> str:
    return (
        f"<tr><td>{escape(label)}</td><td>{s.n}</td><td>{fmt_ms(s.mean)}</td><td>{fmt_ms(s.p50)}</td>"
        f"<td>{fmt_ms(s.p90)}</td><td>{fmt_ms(s.p99)}</td></tr>"
    )


def _percentile_card(a: Analysis) -> str:
    totals = [_stats_row("end-to-end", a.e2e)]
    if a.ttft is not None:
        totals.append(_stats_row("time to first token (client)", a.ttft))
    if a.model_ttft is not None:
        totals.append(_stats_row("time to first token (model server)", a.model_ttft))
    hops = hops_section(a)
    return (
        '<section class="card" id="percentiles"><h2>Percentiles</h2>'
        + _table(groups_section(a), "groups", swatches=True)
        + '<br><table id="totals"><tr><th></th><th>n</th><th>mean ms</th>'
        "<th>P50 ms</th><th>P90 ms</th><th>P99 ms</th></tr>"
        + "".join(totals)
        + "</table>"
        + ("" if hops is None else "<h2>Network hops</h2>" + _table(hops, "hops"))
        + "</section>"
    )


def _whatif_card(w: WhatIf) -> str:
    scale = w.after.p50 / w.before.p50 if w.before.p50 > 0 else 0.0
    bars = [
        ("before", list(w.before_groups), f"P50 {fmt_ms(w.before.p50)} ms"),
        (
            f"{w.stage} {w.speedup:g}x",
            [(n, s * scale) for n, s in w.after_groups],
            f"P50 {fmt_ms(w.after.p50)} ms",
        ),
    ]
    speed, shares = whatif_sections(w)[:2]
    return (
        f'<section class="card" id="whatif"><h2>{escape(speed.title)}</h2>'
        + _notes(speed.notes[:1], headline=True)
        + _notes([*speed.notes[1:], "Bars are drawn to scale."])
        + _stacked_bars(bars, "whatif-bars")
        + _legend([n for n, _ in w.before_groups])
        + _table(speed, "whatif-table")
        + "<br>"
        + _table(shares, "whatif-shares", swatches=True)
        + "</section>"
    )


def _comparison_card(c: Comparison) -> str:
    b, k = c.baseline, c.candidate
    scale = k.e2e.mean / b.e2e.mean if b.e2e.mean > 0 else 0.0
    bars = [
        ("baseline", [(g.name, g.share) for g in b.groups], f"mean {fmt_ms(b.e2e.mean)} ms"),
        (
            "candidate",
            [(g.name, g.share * scale) for g in k.groups],
            f"mean {fmt_ms(k.e2e.mean)} ms",
        ),
    ]
    names = sorted({g.name for g in b.groups} | {g.name for g in k.groups})
    table = comparison_sections(c)[0]
    return (
        '<section class="card" id="compare"><h2>Candidate against baseline</h2>'
        + _notes(table.notes, headline=True)
        + _stacked_bars(bars, "compare-bars")
        + _legend(names)
        + _table(table, "compare-table", swatches=True)
        + "</section>"
    )


def _bench_card(bench: dict[str, Any]) -> str:
    levels = bench.get("levels") or []
    width, height, left, bottom, top = 1100, 260, 60, 30, 14
    plot_w, plot_h = width - left - 150, height - bottom - top
    ymax = max([lv["e2e_ms"]["p90"] for lv in levels if lv["e2e_ms"]["n"]] + [1.0])
    xs = [lv["concurrency"] for lv in levels]
    parts = [
        f'<svg id="bench-chart" class="chart" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'stroke="#888"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#888"/>',
        f'<text x="4" y="{top + 10}">{fmt_ms(ymax)} ms</text>',
        f'<text x="4" y="{top + plot_h}">0</text>',
    ]

    def px(i: int) -> float:
        return left + (plot_w * (i + 0.5) / max(1, len(xs)))

    def py(v: float) -> float:
        return top + plot_h - plot_h * v / ymax

    for key, colour in (("p50", "#0072b2"), ("p90", "#d55e00")):
        points = [
            (px(i), py(lv["e2e_ms"][key])) for i, lv in enumerate(levels) if lv["e2e_ms"]["n"]
        ]
        if points:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
            parts.append(
                f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2.5"/>'
            )
            for x, y in points:
                parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{colour}"/>')
        parts.append(
            f'<text x="{left + plot_w + 14}" y="{top + (20 if key == "p50" else 40)}" '
            f'style="fill:{colour}">end-to-end {key.upper()}</text>'
        )
    for i, c in enumerate(xs):
        parts.append(f'<text x="{px(i) - 8:.1f}" y="{top + plot_h + 18}">c={c}</text>')
    parts.append("</svg>")
    table = bench_sections(bench)[0]
    return (
        '<section class="card" id="bench"><h2>'
        f"{escape(table.title)}</h2>"
        + _notes(table.notes[:1], headline=True)
        + "".join(parts)
        + _table(table, "bench-table")
        + _notes(table.notes[1:])
        + "</section>"
    )


def _waterfall_svg(wf: Waterfall, index: int, width: int = 1100) -> str:
    label_w, row_h, top = 330, 20, 22
    plot_w = width - label_w - 20
    height = top + row_h * len(wf.rows) + 8
    span_ms = wf.e2e_ms or 1.0
    pattern = f"net-{index}"
    parts = [
        f'<svg id="waterfall-{index}" class="waterfall" role="img" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}">',
        f'<defs><pattern id="{pattern}" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect width="6" height="6" fill="#ffffff"/>'
        f'<rect width="3" height="6" fill="{STAGE_COLOURS["network"]}"/></pattern></defs>',
    ]
    for tick in range(5):
        ms = span_ms * tick / 4
        x = label_w + plot_w * tick / 4
        anchor = "end" if tick == 4 else "start"
        parts.append(
            f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{height}" stroke="#eceff3"/>'
            f'<text x="{x + 2:.1f}" y="{top - 9}" text-anchor="{anchor}">{fmt_ms(ms)} ms</text>'
        )
    for r, row in enumerate(wf.rows):
        y = top + r * row_h
        text = f"{row.service}: {row.name}"
        if len(text) > 44:
            text = text[:43] + "…"
        parts.append(
            f'<text x="{4 + row.depth * 10}" y="{y + 14}">{escape(text)}'
            f"<title>{escape(row.service)}: {escape(row.name)} ({escape(row.stage)})</title>"
            "</text>"
        )
        x = label_w + plot_w * row.start_ms / span_ms
        w = max(1.0, plot_w * (row.end_ms - row.start_ms) / span_ms)
        fill = f"url(#{pattern})" if row.gaps else stage_colour(row.stage)
        parts.append(
            f'<rect x="{x:.2f}" y="{y + 3}" width="{w:.2f}" height="{row_h - 6}" rx="2" '
            f'fill="{fill}" data-stage="{escape(row.stage)}">'
            f"<title>{escape(row.stage)} · {escape(row.name)}: "
            f"{fmt_ms(row.end_ms - row.start_ms)} ms, {fmt_ms(row.critical_ms)} ms on the critical "
            "path</title></rect>"
        )
        for g0, g1, hop in row.gaps:
            gx = label_w + plot_w * g0 / span_ms
            gw = max(1.0, plot_w * (g1 - g0) / span_ms)
            parts.append(
                f'<rect x="{gx:.2f}" y="{y + 3}" width="{gw:.2f}" height="{row_h - 6}" '
                f'fill="{STAGE_COLOURS["network"]}" class="gap">'
                f"<title>network {escape(hop)}: {fmt_ms(g1 - g0)} ms</title></rect>"
            )
    parts.append("</svg>")
    return "".join(parts)


def _waterfall_card(wf: Waterfall, index: int, jaeger_url: str) -> str:
    link = f"{jaeger_url.rstrip('/')}/trace/{wf.trace_id}"
    stages = sorted({r.stage for r in wf.rows})
    return (
        f'<section class="card" id="exemplar-{index}"><h2>{escape(wf.label)}: '
        f"{fmt_ms(wf.e2e_ms)} ms end to end</h2>"
        f'<p>trace <code>{escape(wf.trace_id)}</code> · <a href="{escape(link)}" '
        'rel="noreferrer noopener" target="_blank">open in Jaeger</a> · grey: time on the '
        "network between services (the CLIENT span outside its remote server span)</p>"
        + _waterfall_svg(wf, index)
        + (
            f"<p>{wf.hidden} more spans are not drawn; Jaeger shows them all.</p>"
            if wf.hidden
            else ""
        )
        + _legend(stages)
        + "</section>"
    )


def _warnings_card(a: Analysis) -> str:
    w = a.warnings
    if not (w.orphans or w.skew_adjusted or w.skipped_traces or w.skipped_spans or w.messages):
        return ""
    items = "".join(f"<li>{escape(m)}</li>" for m in w.messages)
    return (
        '<section class="card warn" id="warnings"><h2>Warnings</h2>'
        f"<p>orphans re-parented: {w.orphans}; skew-adjusted spans: {w.skew_adjusted}; "
        f"skipped traces: {w.skipped_traces}; skipped spans: {w.skipped_spans}</p>"
        f'<ul class="notes">{items}</ul></section>'
    )


def to_html(report: Report) -> str:
    """The whole page as one string (UTF-8, no external resources)."""
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    meta = f"generated by hoptrace {now}"
    if report.source:
        meta += f" from {report.source}"
    body = [f"<h1>{escape(report.title)}</h1>", f'<div class="meta">{escape(meta)}</div>']
    if report.whatif is not None:
        body.append(_whatif_card(report.whatif))
    if report.comparison is not None:
        body.append(_comparison_card(report.comparison))
    if report.bench is not None:
        body.append(_bench_card(report.bench))
    if report.analysis is not None:
        body.append(_share_card(report.analysis))
        body.append(_percentile_card(report.analysis))
    for i, wf in enumerate(report.waterfalls):
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
