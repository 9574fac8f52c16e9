"""Attribution of one trace into a :class:`~tracer.analysis._table.TraceTable` row: the
step every path (in memory, streamed, on many workers) shares, so they agree."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter

from tracer.analysis._table import Projected, TraceTable
from tracer.analysis.breakdown import break_down
from tracer.analysis.execution.batches import Answer, ShapeBatcher, batching
from tracer.analysis.execution.lines import spans_of, where
from tracer.analysis.prepare import PreparedTrace, StageMap, prepare
from tracer.analysis.traceset import TraceFilter
from tracer.spans.model import Span, Warnings

__all__ = ["NONE", "Attributor", "split_value"]

_PARENT_ID = attrgetter("parent_id")
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
    with ``projection`` (a :class:`~tracer.analysis.whatif.Projection`) its what-if.

    Traces of a shape seen before are queued and attributed a batch at a time
    (:mod:`tracer.analysis.execution.batches`); reading :attr:`table` (or :meth:`flush`) runs
    what is queued. ``batched=False`` (or ``HOPTRACE_BATCH=off``) attributes every trace
    on its own."""

    group_by: str
    stage_map: StageMap | None
    selection: TraceFilter = field(default_factory=TraceFilter)
    rows: TraceTable = field(default_factory=TraceTable)
    split_by: str | None = None
    projection: Callable[[PreparedTrace], Projected] | None = None
    batched: bool = field(default_factory=batching)
    #: the files streamed, by their index in ``seq`` (to read a dropped trace again)
    files: dict[int, str] = field(default_factory=dict, repr=False)
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
                reread=self._reread,
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

    def __call__(
        self,
        trace_id: str,
        spans: list[Span] | None,
        seq: int,
        last_end: int,
        ticket: Answer = None,
    ) -> None:
        """Attribute one trace (or one part of it; ``join_parts`` sorts that out);
        ``ticket``: what :meth:`early` gave for the same spans (which the caller may
        then have dropped: None)."""
        if spans is None:  # dropped once early() gave the ticket: no split or selection
            if not ticket or self._batcher is None:
                raise ValueError("a trace's spans, or its ticket from early()")
            self._batcher.offer(trace_id, None, seq, last_end, None, ticket)
            return
        value = None if self.split_by is None else split_value(spans, self.split_by)
        if self._selecting and not self.selection.matches(spans):
            self.rows.mark(trace_id, seq, last_end, None, value, selected=False)
            return
        if self._batcher is not None and self._batcher.offer(
            trace_id, spans, seq, last_end, value, ticket
        ):
            return
        self._attribute(trace_id, spans, seq, last_end, value)

    @property
    def takes_tickets(self) -> bool:
        """Whether :meth:`early` may be asked: traces are batched, and no filter,
        ``--split-by`` or what-if needs every trace's spans when it is complete."""
        return (
            self._batcher is not None
            and not self._selecting
            and self.split_by is None
            and self.projection is None
        )

    def early(self, trace_id: str, spans: list[Span], learn: bool = False) -> tuple[Answer, bool]:
        """The batches' ticket for these spans (:meth:`ShapeBatcher.ticket`: None while
        their shape is unknown), taken while they are fresh in the caches, and whether
        the caller may drop the spans (then giving None for them with the ticket);
        only when :attr:`takes_tickets`. ``learn``: an unknown shape is learned from
        these spans if they hold their trace's root (a trace quiet for a while)."""
        assert self._batcher is not None
        # A part whose top span's parent is elsewhere (a service's subtree, exported
        # before its callers'): the rest of the trace is surely still to come. It
        # teaches no shape, and its spans are kept.
        rooted = None in map(_PARENT_ID, spans)
        ticket = self._batcher.ticket(trace_id, spans, learn and rooted)
        # A trace whose clocks the batch would give back to the scalar path keeps its
        # spans too.
        return ticket, bool(ticket) and rooted and self._batcher.nested(ticket, spans)

    def _reread(self, trace_id: str, seq: int, last_end: int, count: int) -> list[Span]:
        """The spans of a trace dropped once its ticket was taken, read again."""
        return spans_of(self.files[where(seq)[0]], trace_id, seq, last_end, count)

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
        self.rows.add(break_down(prepared, self.group_by), seq, last_end, issues, value, projected)
