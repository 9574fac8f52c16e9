"""Attribution of one trace into a :class:`~tracer.analysis._table.TraceTable` row: the
step every path (in memory, streamed, on many workers) shares, so they agree."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tracer.analysis._table import Projected, TraceTable
from tracer.analysis.breakdown import break_down
from tracer.analysis.prepare import PreparedTrace, StageMap, prepare
from tracer.analysis.traceset import TraceFilter
from tracer.spans.model import Span, Warnings

__all__ = ["NONE", "Attributor", "split_value"]

#: The value of traces that do not carry the attribute.
NONE = "(none)"


def split_value(spans: list[Span], attribute: str) -> str:
    """The value of ``attribute`` on the earliest span that carries it, else :data:`NONE`."""
    best: Span | None = None
    for s in spans:
        if attribute in s.attributes and (best is None or s.start_ns < best.start_ns):
            best = s
    if best is None:
        return NONE
    value = best.attributes[attribute]
    return str(value) if not isinstance(value, list) else ",".join(map(str, value))


@dataclass
class Attributor:
    """Attributes complete traces into ``table``, keeping whole traces ``selection``
    keeps; with ``split_by``, each row keeps the trace's value of that attribute, and
    with ``projection`` (a :class:`~tracer.analysis.whatif.Projection`) its what-if."""

    group_by: str
    stage_map: StageMap | None
    selection: TraceFilter = field(default_factory=TraceFilter)
    table: TraceTable = field(default_factory=TraceTable)
    split_by: str | None = None
    projection: Callable[[PreparedTrace], Projected] | None = None

    def __call__(self, trace_id: str, spans: list[Span], seq: int, last_end: int) -> None:
        """Attribute one trace (or one part of it; ``join_parts`` sorts that out)."""
        value = None if self.split_by is None else split_value(spans, self.split_by)
        if self.selection.active and not self.selection.matches(spans):
            self.table.mark(trace_id, seq, last_end, None, value, selected=False)
            return
        issues = Warnings()
        prepared = prepare(trace_id, spans, issues, self.stage_map)
        if prepared is None:
            issues.skipped_traces += 1
            self.table.mark(trace_id, seq, last_end, issues, value)
            return
        projected = None if self.projection is None else self.projection(prepared)
        self.table.add(break_down(prepared, self.group_by), seq, last_end, issues, value, projected)
