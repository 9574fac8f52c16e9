"""Exemplar traces laid out for drawing: rows in depth-first order, times from the root.

The renderers draw these; nothing here knows about HTML or SVG.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tracer.analysis.aggregate import Analysis
from tracer.analysis.critical_path import trace_times
from tracer.analysis.prepare import PreparedTrace, StageMap, prepare
from tracer.analysis.traceset import TraceSet
from tracer.spans.model import KIND_CLIENT, Warnings

__all__ = ["Waterfall", "WaterfallRow", "exemplar_waterfalls", "waterfall"]


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


def waterfall(trace: PreparedTrace, label: str, max_rows: int = 60) -> Waterfall:
    """Lay out ``trace``: depth-first from the root, children by start time.

    A network span (a CLIENT span whose child runs in another service) carries the
    stretches its remote children do not cover as ``gaps``: the time on the wire.
    """
    t0 = trace.start[trace.root]
    own = trace_times(trace)
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
    analysis: Analysis, traceset: TraceSet | None, stage_map: StageMap | None = None
) -> list[Waterfall]:
    """Waterfalls of the P50 and P90 exemplar traces of ``analysis`` (none without traces)."""
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
        if prepared is not None:
            out.append(waterfall(prepared, label))
    return out
