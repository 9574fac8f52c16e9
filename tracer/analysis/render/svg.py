"""SVG pieces of the HTML report: stage colours, stacked share bars, waterfalls, the
bench's latency chart. Inline SVG only: the page fetches nothing."""

from __future__ import annotations

import hashlib
import math
from html import escape

from tracer.analysis.model.substages import canonical
from tracer.analysis.render.sections import fmt_ms
from tracer.analysis.whatif.waterfall import Waterfall

__all__ = [
    "STAGE_COLOURS",
    "WATERFALL_KEYS",
    "legend",
    "line_chart",
    "nice_step",
    "stacked_bars",
    "stage_colour",
    "waterfall_svg",
]

# The seven stages in request order, network and other: colours that stay apart
# for most kinds of colour blindness (Okabe-Ito and neighbours).
STAGE_COLOURS = {
    "client": "#56b4e9",
    "gateway": "#e69f00",
    "auth": "#cc79a7",
    "guardrail": "#882255",
    "context": "#009e73",
    "inference": "#d55e00",
    "tool": "#44aa99",
    "postprocess": "#0072b2",
    "return": "#b8a000",
    "network": "#9a9a9a",
    "other": "#c8c8c8",
}
_EXTRA = ("#8c564b", "#17becf", "#7f7f7f", "#bcbd22", "#9467bd", "#2ca02c", "#ff7f0e")


#: How far a sub-stage's colour moves from its parent's: towards white (positive) or
#: black (negative); the engine's phases in request order, light to dark.
_SUB_SHADES = {"queue": 0.55, "prefill": 0.28, "decode": -0.3}


def _shade(colour: str, amount: float) -> str:
    rgb = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
    target = 255 if amount > 0 else 0
    mixed = [round(c + (target - c) * abs(amount)) for c in rgb]
    return "#" + "".join(f"{c:02x}" for c in mixed)


def stage_colour(name: str) -> str:
    """A fixed colour per canonical stage; a sub-stage (``inference.decode``) a shade of
    its parent's; other names a stable colour of their own."""
    if name in STAGE_COLOURS:
        return STAGE_COLOURS[name]
    if "." in name:
        parent, sub = name.split(".", 1)
        digest = hashlib.sha1(sub.encode()).digest()
        amount = _SUB_SHADES.get(sub, (digest[0] % 5 - 2) * 0.18 or 0.4)
        return _shade(stage_colour(parent), amount)
    digest = hashlib.sha1(name.encode()).digest()
    return _EXTRA[digest[0] % len(_EXTRA)]


#: The legend's entries for the patterns of a waterfall, after its stages.
_HATCH = f"repeating-linear-gradient(45deg,{STAGE_COLOURS['network']} 0 2px,#fff 2px 4px)"
WATERFALL_KEYS = (
    (
        f"background:{_HATCH}",
        "network span, while the service it calls runs",
    ),
    (f"background:{STAGE_COLOURS['network']}", "network: time on the wire between services"),
    ("background:#fff;box-shadow:inset 0 0 0 1.5px #5b6475", "outlined: off the critical path"),
    ("background:#1d2330;height:4px;vertical-align:2px", "dark line: on the critical path"),
)


def legend(names: list[str], keys: tuple[tuple[str, str], ...] = ()) -> str:
    """A legend of ``names`` in the canonical stage order (the same in every section),
    then the ``keys`` (a swatch's CSS, what it means)."""
    items = "".join(
        f'<span><i class="swatch" style="background:{stage_colour(n)}"></i>{escape(n)}</span>'
        for n in canonical(dict.fromkeys(names), lambda n: n)
    )
    items += "".join(
        f'<span><i class="swatch" style="{css}"></i>{escape(text)}</span>' for css, text in keys
    )
    return f'<div class="legend">{items}</div>'


def nice_step(span: float, most: int = 6) -> float:
    """The smallest step of 1, 2 or 5 times a power of ten that puts at most ``most``
    steps in ``span``: axis ticks on round values (0, 500, 1,000 ms ...)."""
    if not span > 0 or not math.isfinite(span):
        return 1.0
    power = 10.0 ** math.floor(math.log10(span / most))
    for mult in (1, 2, 5, 10):
        if span / (mult * power) <= most:
            return mult * power
    return 10 * power


#: The charts' width in their own units. The page scales them to its width: at 880 they
#: are drawn 1:1 on a wide screen and keep about 10 px text in an 800 px window.
CHART_WIDTH = 880


def _text_px(text: str) -> float:
    """About how wide ``text`` is at the charts' 12 px."""
    return 6.6 * len(text)


def stacked_bars(
    bars: list[tuple[str, list[tuple[str, float]], str]],
    css_id: str,
    width: int = CHART_WIDTH,
    scales: list[float] | None = None,
) -> str:
    """Horizontal stacked bars; each bar is (label, [(group, fraction)], caption).

    A piece is labelled with its fraction of its own bar; ``scales`` (one per bar,
    default 1) draws a bar shorter or longer than the plot, so bars of different
    totals are drawn to scale while each piece still reads as a share of its bar.
    """
    caption_w = max([_text_px(c) for _, _, c in bars] + [120.0]) + 24
    label_w, h, gap = 150, 26, 12
    plot_w = width - label_w - caption_w
    height = len(bars) * (h + gap) + gap
    parts = [
        f'<svg id="{css_id}" class="chart" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">'
    ]
    for row, (label, pieces, caption) in enumerate(bars):
        scale = 1.0 if scales is None else scales[row]
        y = gap + row * (h + gap)
        parts.append(f'<text x="0" y="{y + h * 0.68:.1f}">{escape(label)}</text>')
        x = float(label_w)
        for name, frac in pieces:
            w = max(0.0, frac) * plot_w * scale
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
            f'<text x="{label_w + plot_w + 10:.1f}" y="{y + h * 0.68:.1f}">{escape(caption)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def waterfall_svg(wf: Waterfall, index: int, width: int = CHART_WIDTH) -> str:
    """One waterfall: every span's bar outlined in its stage's colour, the stretches of
    the critical path it holds filled with it and a dark line on them (as Jaeger's UI
    marks the path; a faded fill would read as a lighter sub-stage's colour), its
    duration printed beside it, round ticks on the time axis."""
    label_w, row_h, top = 330, 20, 22
    plot_w = width - label_w - 20
    height = top + row_h * len(wf.rows) + 8
    span_ms = wf.scale_ms or 1.0
    pattern = f"net-{index}"
    net = STAGE_COLOURS["network"]
    parts = [
        f'<svg id="waterfall-{index}" class="waterfall" role="img" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}">',
        f'<defs><pattern id="{pattern}" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect width="6" height="6" fill="#ffffff"/>'
        f'<rect width="3" height="6" fill="{net}"/></pattern></defs>',
    ]
    step = nice_step(span_ms)
    ticks = int(span_ms / step + 1e-9)
    for tick in range(ticks + 1):
        ms = step * tick
        x = label_w + plot_w * ms / span_ms
        text = (
            f"{ms:,.0f} ms" if step >= 1 else f"{ms:,.{max(1, -math.floor(math.log10(step)))}f} ms"
        )
        anchor = "end" if x + _text_px(text) > width else "start"
        parts.append(
            f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{height}" stroke="#eceff3"/>'
            f'<text x="{x + 2:.1f}" y="{top - 9}" text-anchor="{anchor}">{text}</text>'
        )

    def px(ms: float) -> float:
        return label_w + plot_w * ms / span_ms

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
        x, duration = px(row.start_ms), row.end_ms - row.start_ms
        w = max(1.0, plot_w * duration / span_ms)
        colour = net if row.gaps else stage_colour(row.stage)
        # A network span hatched and faded; any other outlined in its stage's colour.
        paint = (
            f'fill="url(#{pattern})" fill-opacity="0.35"'
            if row.gaps
            else f'fill="#ffffff" stroke="{colour}" stroke-width="1.5"'
        )
        parts.append(
            f'<rect x="{x:.2f}" y="{y + 3}" width="{w:.2f}" height="{row_h - 6}" rx="2" '
            f'{paint} data-stage="{escape(row.stage)}">'
            f"<title>{escape(row.stage)} · {escape(row.name)}: "
            f"{fmt_ms(duration)} ms, {fmt_ms(row.critical_ms)} ms on the critical "
            "path</title></rect>"
        )
        for g0, g1, hop in row.gaps:
            parts.append(
                f'<rect x="{px(g0):.2f}" y="{y + 3}" width="{max(1.0, px(g1) - px(g0)):.2f}" '
                f'height="{row_h - 6}" fill="{net}" fill-opacity="0.6" class="gap">'
                f"<title>network {escape(hop)}: {fmt_ms(g1 - g0)} ms</title></rect>"
            )
        for c0, c1 in row.critical:
            cw = max(1.0, px(c1) - px(c0))
            parts.append(
                f'<rect x="{px(c0):.2f}" y="{y + 3}" width="{cw:.2f}" height="{row_h - 6}" '
                f'fill="{colour}" class="critical"><title>on the critical path: '
                f"{fmt_ms(c1 - c0)} ms</title></rect>"
                f'<rect x="{px(c0):.2f}" y="{y + row_h / 2 - 1.5:.1f}" width="{cw:.2f}" '
                'height="3" fill="#1d2330" class="critical-line"/>'
            )
        label = f"{fmt_ms(duration)} ms"
        if row.critical_ms < duration * 0.95:
            label += f" ({fmt_ms(row.critical_ms)} on the path)"
        if x + w + 6 + _text_px(label) <= width:
            parts.append(f'<text x="{x + w + 5:.1f}" y="{y + 14}">{escape(label)}</text>')
        elif x - 6 - _text_px(label) >= label_w:
            parts.append(
                f'<text x="{x - 5:.1f}" y="{y + 14}" text-anchor="end">{escape(label)}</text>'
            )
        else:  # on the bar, past the critical stretches the text would cover
            at = x
            for c0, c1 in sorted(row.critical):
                if px(c0) < at + _text_px(label) + 10 and px(c1) > at:
                    at = px(c1)
            parts.append(
                f'<text x="{at + 5:.1f}" y="{y + 14}" class="on-bar">{escape(label)}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def line_chart(
    labels: list[str],
    series: list[tuple[str, str, list[float | None]]],
    css_id: str,
    width: int = CHART_WIDTH,
    height: int = 260,
) -> str:
    """Lines over evenly spaced x ``labels``; each series is (name, colour, values),
    a None value leaving a hole. The y axis starts at 0 and is in milliseconds."""
    left, bottom, top = 60, 30, 14
    plot_w, plot_h = width - left - 150, height - bottom - top
    ymax = max([v for _, _, values in series for v in values if v is not None] + [1.0])
    parts = [
        f'<svg id="{css_id}" class="chart" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'stroke="#888"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#888"/>',
        f'<text x="4" y="{top + 10}">{fmt_ms(ymax)} ms</text>',
        f'<text x="4" y="{top + plot_h}">0</text>',
    ]

    def px(i: int) -> float:
        return left + (plot_w * (i + 0.5) / max(1, len(labels)))

    def py(v: float) -> float:
        return top + plot_h - plot_h * v / ymax

    for row, (name, colour, values) in enumerate(series):
        points = [(px(i), py(v)) for i, v in enumerate(values) if v is not None]
        if points:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
            parts.append(
                f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2.5"/>'
            )
            for x, y in points:
                parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{colour}"/>')
        parts.append(
            f'<text x="{left + plot_w + 14}" y="{top + 20 * (row + 1)}" '
            f'style="fill:{colour}">{escape(name)}</text>'
        )
    for i, label in enumerate(labels):
        parts.append(f'<text x="{px(i) - 8:.1f}" y="{top + plot_h + 18}">{escape(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)
