"""Attribution of one trace into a :class:`~tracer.analysis.table._table.TraceTable` row: the
step every path (in memory, streamed, on many workers) shares, so they agree."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tracer.analysis.attribution.batches import ShapeBatcher, batching
from tracer.analysis.attribution.words import earliest
from tracer.analysis.model.breakdown import break_down
from tracer.analysis.model.prepare import PreparedTrace, StageMap, prepare
from tracer.analysis.model.traceset import TraceFilter
from tracer.analysis.sampling.weights import trace_weight
from tracer.analysis.table._table import Projected, TraceTable
from tracer.analysis.table.schema import FILLED, filled
from tracer.spans.model import Span, Warnings

__all__ = ["NONE", "Attributor", "split_value"]

#: The value of traces that do not carry the attribute.
NONE = "(none)"


def split_value(spans: list[Span], attribute: str) -> str:
    """The value of ``attribute`` on the earliest span that carries it, else :data:`NONE`."""
    best = earliest(spans, attribute)
    if best is None:
        return NONE
    value = best.attributes[attribute]
    return str(value) if not isinstance(value, list) else ",".join(map(str, value))


@dataclass
class Attributor:
    """Attributes complete traces into ``table``, keeping whole traces ``selection``
    keeps; with ``split_by``, each row keeps the trace's value of that attribute, and
    with ``projection`` (a :class:`~tracer.analysis.whatif.retime.Projection`) its what-if.

    Traces of a shape seen before are queued and attributed a batch at a time
    (:mod:`tracer.analysis.attribution.batches`); reading :attr:`table` (or :meth:`flush`) runs
    what is queued. ``batched=False`` (or ``HOPTRACE_BATCH=off``) attributes every trace
    on its own."""

    group_by: str
    stage_map: StageMap | None
    selection: TraceFilter = field(default_factory=TraceFilter)
    rows: TraceTable = field(default_factory=TraceTable)
    split_by: str | None = None
    projection: Callable[[PreparedTrace], Projected] | None = None
    batched: bool = field(default_factory=batching)
    _batcher: ShapeBatcher | None = field(default=None, init=False, repr=False)
    _selecting: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        self._selecting = self.selection.active
        if self.batched:
            self._batcher = ShapeBatcher(
                self.group_by,
                self.stage_map,
                lambda: self.rows,
                self._attribute,
                projection=self.projection,
            )

    @property
    def table(self) -> TraceTable:
        """The rows, every queued trace attributed."""
        self.flush()
        return self.rows

    @table.setter
    def table(self, table: TraceTable) -> None:
        self.flush()
        self.rows = table

    def flush(self) -> None:
        """Attribute the queued traces."""
        if self._batcher is not None:
            self._batcher.flush()

    def __call__(self, trace_id: str, spans: list[Span], seq: int, last_end: int) -> None:
        """Attribute one trace (or one part of it; ``join_parts`` sorts that out)."""
        value = None if self.split_by is None else split_value(spans, self.split_by)
        if self._selecting and not self.selection.matches(spans):
            self.rows.mark(trace_id, seq, last_end, None, value, selected=False)
            return
        if self._batcher is not None and self._batcher.offer(trace_id, spans, seq, last_end, value):
            return
        self._attribute(trace_id, spans, seq, last_end, value)

    def _attribute(
        self, trace_id: str, spans: list[Span], seq: int, last_end: int, value: str | None
    ) -> None:
        issues = Warnings()
        prepared = prepare(trace_id, spans, issues, self.stage_map)
        if prepared is None:
            issues.skipped_traces += 1
            self.rows.mark(trace_id, seq, last_end, issues, value)
            return
        projected = None if self.projection is None else self.projection(prepared)
        weight = trace_weight(prepared.spans, prepared.spans[prepared.root])
        b = break_down(prepared, self.group_by)
        if FILLED:
            b.filled = filled(prepared)
        self.rows.add(b, seq, last_end, issues, value, projected, weight)
