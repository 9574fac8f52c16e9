"""Exemplar traces laid out for drawing: rows in depth-first order, times from the root.

Each row carries its span's critical-path sections (the stretches of the trace's
critical path the span itself holds, :func:`tracer.analysis.model.dependencies.critical_sections`),
so a renderer can draw them as Jaeger v2's UI does: the critical part of a bar in full,
the rest muted. :func:`projected_waterfall` lays out the same trace retimed with one
stage k times faster (:func:`tracer.analysis.whatif.retime.retime`). The renderers draw these;
nothing here knows about HTML or SVG.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tracer.analysis.aggregate import Analysis
from tracer.analysis.model.critical_path import trace_dependencies
from tracer.analysis.model.dependencies import Dependencies, critical_sections, dependencies
from tracer.analysis.model.prepare import PreparedTrace, StageMap, prepare
from tracer.analysis.model.traceset import TraceSet
from tracer.spans.model import KIND_CLIENT, Warnings

__all__ = [
    "Waterfall",
    "WaterfallRow",
    "exemplar_waterfalls",
    "projected_waterfall",
    "waterfall",
]


@dataclass
class WaterfallRow:
    """One span of a waterfall; times in ms from the root's start.

    ``critical`` are the (start, end) stretches of the critical path this span holds
    itself (its own time on the path, ``critical_ms`` in all); ``gaps`` the stretches a
    network span's remote children do not cover, with the hop's name.
    """

    depth: int
    name: str
    service: str
    stage: str
    start_ms: float
    end_ms: float
    critical_ms: float
    gaps: list[tuple[float, float, str]] = field(default_factory=list)
    critical: list[tuple[float, float]] = field(default_factory=list)


@dataclass
class Waterfall:
    """An exemplar trace laid out for drawing.

    ``scale_ms`` is the length the time axis spans (the trace's own end-to-end time
    unless another waterfall sets it: a projection drawn at its original's scale);
    ``note`` says how the trace was retimed, if it was.
    """

    label: str
    trace_id: str
    e2e_ms: float
    rows: list[WaterfallRow]
    hidden: int = 0  # spans past the row limit
    scale_ms: float = 0.0
    note: str = ""

    def __post_init__(self) -> None:
        if self.scale_ms <= 0:
            self.scale_ms = self.e2e_ms


def waterfall(trace: PreparedTrace, label: str, max_rows: int = 60) -> Waterfall:
    """Lay out ``trace``: depth-first from the root, children by start time.

    A network span (a CLIENT span whose child runs in another service) carries the
    stretches its remote children do not cover as ``gaps``: the time on the wire.
    """
    t0 = trace.start[trace.root]
    start = [float(s - t0) for s in trace.start]
    end = [float(e - t0) for e in trace.end]
    deps = trace_dependencies(trace)
    return _layout(trace, label, max_rows, start, end, deps, set(range(len(trace.spans))))


def projected_waterfall(
    trace: PreparedTrace, label: str, stage: str, speedup: float, max_rows: int = 60
) -> Waterfall:
    """``trace`` retimed with ``stage`` (and its sub-stages) ``speedup`` times faster, its
    dependencies kept, laid out like :func:`waterfall`; its critical path is walked
    again over the new times. Spans outside the dependency model (not blocking, clipped
    away) are not drawn.
    """
    from tracer.analysis.whatif.retime import retime

    old = trace_dependencies(trace)
    start, end = retime(trace, stage, speedup)
    inside = {old.root} | {c for kids in old.kids for c in kids}
    # The new times are ns from the root's start: the critical path walked over them
    # with the same model (rounded to whole ns, as span times are).
    new_deps = dependencies(
        trace.root,
        trace.children,
        [round(s) for s in start],
        [round(e) for e in end],
        [i in inside for i in range(len(trace.spans))],
        trace.blocking,
    )
    out = _layout(trace, label, max_rows, start, end, new_deps, inside)
    out.note = f"{stage} {speedup:g}x faster, every other span as measured, dependencies kept"
    return out


#: A phase shorter than this prints as 0.0 ms: not drawn.
_EMPTY_NS = 50_000


def _layout(
    trace: PreparedTrace,
    label: str,
    max_rows: int,
    start: Sequence[float],
    end: Sequence[float],
    deps: Dependencies,
    drawn: set[int],
) -> Waterfall:
    """Rows of ``trace`` with span times ``start``/``end`` (ns from the root's start) and
    the critical path of ``deps`` (whose times are ``start``'s, shifted by the root's
    start if absolute)."""
    shift = deps.lo[deps.root] - round(start[trace.root])  # integers: exact at 1e18 ns
    sections: dict[int, list[tuple[float, float]]] = {}
    for s, lo, hi in critical_sections(deps):
        sections.setdefault(s, []).append(((lo - shift) / 1e6, (hi - shift) / 1e6))
    rows: list[WaterfallRow] = []
    stack = [(trace.root, 0)]
    # An engine phase of no measurable time (a queue the engine reports but did not
    # use) is not drawn, as the tables leave such a sub-stage out.
    phases_from, empty = len(trace.spans) - trace.synthetic, 0
    while stack and len(rows) < max_rows:
        i, depth = stack.pop()
        if i >= phases_from and end[i] - start[i] < _EMPTY_NS:
            empty += 1
            continue
        span = trace.spans[i]
        mine = sections.get(i, [])
        row = WaterfallRow(
            depth=depth,
            name=span.name,
            service=span.service,
            stage=trace.stage[i],
            start_ms=start[i] / 1e6,
            end_ms=end[i] / 1e6,
            critical_ms=sum(b - a for a, b in mine),
            critical=mine,
        )
        hop = trace.hop[i]
        if hop is not None and span.kind == KIND_CLIENT:
            remote = [
                c
                for c in trace.children[i]
                if trace.spans[c].service != span.service and c in drawn
            ]
            if remote:
                first = min(start[c] for c in remote)
                last = max(end[c] for c in remote)
                text = f"{hop[0]} -> {hop[1]}"
                if first > start[i]:
                    row.gaps.append((row.start_ms, first / 1e6, text))
                if end[i] > last:
                    row.gaps.append((last / 1e6, row.end_ms, text))
        rows.append(row)
        kids = sorted(
            (c for c in trace.children[i] if c in drawn), key=lambda c: start[c], reverse=True
        )
        stack.extend((c, depth + 1) for c in kids)
    e2e_ms = (end[trace.root] - start[trace.root]) / 1e6
    return Waterfall(label, trace.trace_id, e2e_ms, rows, len(drawn) - len(rows) - empty)


def exemplar_waterfalls(
    analysis: Analysis,
    traceset: TraceSet | None,
    stage_map: StageMap | None = None,
    projection: tuple[str, float] | None = None,
) -> list[Waterfall]:
    """Waterfalls of the P50 and P90 exemplar traces of ``analysis`` (none without traces).

    With ``projection`` (stage, speedup), the P50 exemplar's projected waterfall
    (:func:`projected_waterfall`, drawn at the exemplar's scale) follows it.
    """
    out: list[Waterfall] = []
    if traceset is None:
        return out
    seen = set()
    for label, key in (("P50 exemplar", "p50"), ("P90 exemplar", "p90")):
        trace_id = analysis.exemplars.get(key)
        if not trace_id or trace_id in seen or trace_id not in traceset.traces:
            continue
        seen.add(trace_id)
        prepared = prepare(trace_id, traceset.traces[trace_id], Warnings(), stage_map)
        if prepared is None:
            continue
        out.append(waterfall(prepared, label))
        if projection is not None and key == "p50":
            stage, speedup = projection
            projected = projected_waterfall(
                prepared, f"P50 exemplar, projected: {stage} {speedup:g}x faster", stage, speedup
            )
            projected.scale_ms = out[-1].e2e_ms
            out.append(projected)
    return out
