"""Attribution of traces that share a shape, a batch at a time over arrays.

Most traces of a service come in a few shapes: the same spans (service, operation,
kind, own stage, attribute keys) under the same parents, in the same input order.
What :func:`~tracer.analysis.prepare.prepare` decides from the shape alone (the root,
the tree, each span's stage and network hop, which spans carry token counts, which
spans can give the time to first token) it decides once, on the first trace of the
shape, and :class:`ShapeBatcher` keeps it. Traces of a known shape are queued; a
batch's clock corrections, both critical-path walks (end to end and to the first
token), group and hop sums and table rows are then computed over (traces x spans)
int64 arrays with numpy, one step per span of the shape instead of one per span of
every trace.

The arithmetic is the scalar path's, step for step (:mod:`tracer.analysis._walks`:
the dependency model's walk, ``ttft_view``, ``prepare._fix_clocks`` over arrays; the
rest of ``breakdown.break_down`` here), on the same nanoseconds, so a row is the row
the scalar path adds
(``tests/analysis/test_shapes.py`` compares them on random traces). A trace whose
clocks must be corrected (a child outside its remote parent: the scalar path shifts
subtrees and counts them) is attributed by the scalar path, as is every trace of a
shape it cannot take: engine sub-stages, a parent cycle, a CLIENT span with more than
one remote child, duplicate span ids, more than one root.

With a what-if projection (``whatif``, ``report --speedup``), each batched trace is
also retimed by the scalar projection itself, on the :class:`PreparedTrace` the scalar
path would build: the shape's tree, stages and hops with the batch's (widened) times.
Only ``prepare`` and the breakdown are saved per trace there; the retiming stays the
scalar arithmetic (floats in the same order).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter, eq, is_not
from typing import Any, Literal, TypeAlias, cast

import numpy as np

from tracer.analysis._table import Projected, TraceTable
from tracer.analysis._walks import fix_clocks, own_times, sums, ttft_view
from tracer.analysis.breakdown import (
    TokenPlan,
    count_planned,
    group_key,
    token_carriers,
    token_plan,
)
from tracer.analysis.prepare import PreparedTrace, StageMap, prepare
from tracer.analysis.stage_map import ENGINE_REQUEST, conventions
from tracer.spans.model import KIND_CLIENT, KIND_CONSUMER, KIND_PRODUCER, Span, Warnings

__all__ = ["BATCH", "ShapeBatcher", "Ticket"]

#: Traces of one shape attributed together.
BATCH = 1024
#: Shapes remembered; traces of further shapes take the scalar path.
MAX_SHAPES = 512
#: Traces queued over all shapes before every batch is run.
MAX_QUEUED = 8192
#: Traces of a shape tried before it is left to the scalar path (each had clocks to
#: shift, so the shape could not be learned from it).
LEARN_TRIES = 8
#: Spans of the largest trace taken (bigger ones are rare and take the scalar path).
MAX_SPANS = 512
#: Children of one span taken: the batch walk compares every pair of siblings (a
#: wider fan-out is rare and takes the scalar path).
MAX_KIDS = 64
_NO = -1  # no time (a table column's None)
#: Times and marks the batches take are under this in magnitude, so that the walks'
#: sums and differences stay inside int64; a trace with one past it (or past int64,
#: which Python's ints hold) takes the scalar path.
_LIMIT = 2**62


@dataclass
class _Shape:
    """What the scalar path decides from a trace's shape, and the traces queued."""

    n: int
    root: int
    order: list[int]
    parent: list[int]
    children: list[list[int]]
    #: each span's children that hold it up (the walks' tree)
    kids: list[list[int]]
    #: (parent, its remote children, parent is CLIENT, per child: exempt from the skew
    #: check (messaging)) in the order the scalar clock correction visits them
    edges: list[tuple[int, list[int], bool, list[bool]]]
    group_of: np.ndarray  # (spans,) group column of each span
    groups: list[str]
    hop_of: np.ndarray  # (spans,) hop column of each span, -1 for none
    hops: list[tuple[str, str]]
    same_service: list[int]  # spans of the root's service (client first token)
    inference: list[int]  # spans whose stage is inference, top-down
    #: innermost spans with token counts, top-down: (span, its input-token key, its
    #: output-token key, its model keys), the keys breakdown.count_tokens would read
    carriers: list[TokenPlan]
    root_service: str
    root_name: str
    #: each span's resolved stage and network hop (``PreparedTrace.stage``, ``.hop``)
    stage: list[str]
    hop: list[tuple[str, str] | None]
    blocking: list[bool] | None
    #: (parent, child) of each remote edge the clock check reads
    nested: list[tuple[int, int]]
    #: a trace's starts, ends and marks (0: none) as n int64 each, in machine order
    pack: Callable[..., bytes]
    ids: list[str] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    last_ends: list[int] = field(default_factory=list)
    splits: list[str | None] = field(default_factory=list)
    tokens: list[_Tokens] = field(default_factory=list)
    #: per trace: its spans' starts, ends and marks (0: none), as int64 (``pack``)
    times: bytearray = field(default_factory=bytearray)
    has: bytearray = field(default_factory=bytearray)  # per span: it has a mark
    spans: list[list[Span] | None] = field(default_factory=list)  # None: dropped (ticket)


#: A shape the batches do not take (learned once).
_SCALAR: Any = object()
_START, _END = attrgetter("start_ns"), attrgetter("end_ns")
_MARK = attrgetter("first_token_ns")
_SPAN_ID, _PARENT_ID = attrgetter("span_id"), attrgetter("parent_id")
_STATIC = attrgetter("service", "name", "kind", "stage")
_ATTRIBUTES = attrgetter("attributes")
_POSITIONS = range(MAX_SPANS)
_Tokens: TypeAlias = tuple[int | None, int | None, str | None, int | None]
#: What :meth:`ShapeBatcher.ticket` works out for a trace (see there); False: the
#: scalar path attributes it.
Ticket: TypeAlias = "tuple[_Shape, bytes, bytes, _Tokens] | Literal[False]"


@dataclass
class _Valued:
    """Shapes whose spans carry attributes a stage rule compares by value: the
    (span, key) slots of those values, and a shape per tuple of them."""

    slots: list[tuple[int, str]]
    shapes: dict[tuple[str, ...], Any]


class ShapeBatcher:
    """Queues traces of known shapes and attributes them in batches into ``table``
    (via :meth:`offer`); :meth:`flush` runs what is queued. ``scalar(trace_id, spans,
    seq, last_end, split)`` attributes a trace the batch gives back."""

    def __init__(
        self,
        group_by: str,
        stage_map: StageMap | None,
        table: Callable[[], TraceTable],
        scalar: Callable[[str, list[Span], int, int, str | None], None],
        batch: int = BATCH,
        projection: Callable[[PreparedTrace], Projected] | None = None,
        reread: Callable[[str, int, int, int], list[Span]] | None = None,
    ) -> None:
        self.group_by = group_by
        self.stage_map = stage_map
        self.projection = projection
        self._table = table
        self._scalar = scalar
        self._reread = reread
        self._batch = batch
        self._shapes: dict[tuple, Any] = {}
        self._learned = 0
        # Traces tried per shape (a trace may be tried twice: once at the stream's
        # second look, once when it is complete; it counts once).
        self._tries: dict[tuple, set[str]] = {}
        self._queued = 0
        # Attribute values the stage rules compare (not only their presence).
        keys: set[str] = set()
        for rules in (conventions(), stage_map):
            for rule in rules.rules if rules is not None else ():
                keys.update(k for k, _ in rule.attributes)
        self._value_keys = sorted(keys)

    def offer(
        self,
        trace_id: str,
        spans: list[Span] | None,
        seq: int,
        last_end: int,
        split: str | None,
        ticket: Ticket | None = None,
    ) -> bool:
        """Queue the trace (True), or False: the caller attributes it the scalar way.
        ``ticket``: what :meth:`ticket` gave for these spans (None: worked out now);
        with one, ``spans`` may be None (the scalar path then reads them again if the
        batch gives the trace back)."""
        if ticket is None:
            assert spans is not None
            ticket = self.ticket(trace_id, spans, learn=True)
        if ticket is None or ticket is False:
            return False
        shape, times, has, tokens = ticket
        shape.ids.append(trace_id)
        shape.seqs.append(seq)
        shape.last_ends.append(last_end)
        shape.splits.append(split)
        shape.times += times  # a copy of machine words: no span is touched
        shape.has.extend(has)
        shape.tokens.append(tokens)
        shape.spans.append(spans)
        self._queued += 1
        if len(shape.ids) >= self._batch:
            self._run(shape)
        elif self._queued >= MAX_QUEUED:
            self.flush()
        return True

    def ticket(self, trace_id: str, spans: list[Span], learn: bool = False) -> Ticket | None:
        """What :meth:`offer` queues for this trace, worked out from its spans: its
        shape, its times and marks as machine words, its token counts. False: the
        scalar path attributes it; None (``learn=False``): its shape is not known yet.

        A streamed trace's ticket is taken as soon as its spans are read, while they
        are in the CPU's caches, and handed to :meth:`offer` once the trace is
        complete (the window later); the spans are not read again unless the batch
        gives the trace back."""
        n = len(spans)
        if n > MAX_SPANS or n == 0:
            return False
        # n <= MAX_SPANS: the positions outlast the ids
        index = dict(zip(map(_SPAN_ID, spans), _POSITIONS, strict=False))
        if len(index) != n:
            return False  # a duplicate span id
        # A missing parent id (None) is not in the index either: -1, as for an orphan.
        parents = tuple(map(index.get, map(_PARENT_ID, spans), repeat(-1)))
        key = (parents, tuple(map(_STATIC, spans)), tuple(map(tuple, map(_ATTRIBUTES, spans))))
        shape = self._shapes.get(key)
        # A key is kept only once its parents passed this check: a known one did.
        if shape is None and (parents.count(-1) != 1 or any(map(eq, parents, range(n)))):
            return False  # orphans to re-parent, every span in a cycle, its own parent
        if type(shape) is _Valued:  # spans with values the stage rules compare
            values = tuple([str(spans[i].attributes[k]) for i, k in shape.slots])
            found = shape.shapes.get(values)
            if found is None:
                if learn:
                    self._new(shape.shapes, values, trace_id, spans)
                    return False  # the first trace of a shape takes the scalar path
                return None
            shape = found
        elif shape is None:
            if not learn:
                return None
            slots = [
                (i, k) for i, s in enumerate(spans) for k in self._value_keys if k in s.attributes
            ]
            if slots:
                self._shapes[key] = _Valued(slots, {})
                return self.ticket(trace_id, spans, learn)
            self._new(self._shapes, key, trace_id, spans)
            return False
        if shape is _SCALAR:
            return False
        marks = list(map(_MARK, spans))  # None where a span has no mark
        has = bytes(map(is_not, marks, repeat(None)))
        try:
            times = shape.pack(
                *map(_START, spans), *map(_END, spans), *[0 if m is None else m for m in marks]
            )
        except struct.error:  # a time or mark past int64 (Python's ints hold any)
            return False
        tokens = count_planned(spans, shape.carriers) if shape.carriers else _NO_TOKENS
        return shape, times, has, tokens

    def flush(self) -> None:
        """Attribute every queued trace."""
        for entry in self._shapes.values():
            for shape in entry.shapes.values() if type(entry) is _Valued else (entry,):
                if type(shape) is _Shape and shape.ids:
                    self._run(shape)

    @staticmethod
    def nested(ticket: Ticket | None, spans: list[Span]) -> bool:
        """Whether every remote child of the ticket's trace (``spans``) lies inside its
        parent's time: then the batch cannot give it back for its clocks (``fix_clocks``
        only widens ends, and a child inside is never skewed), so its spans are not
        needed again unless its times are too wide for the batch."""
        if not ticket:
            return False
        for p, c in ticket[0].nested:
            parent, child = spans[p], spans[c]
            if child.start_ns < parent.start_ns or child.end_ns > parent.end_ns:
                return False
        return True

    def _new(self, shapes: dict, key: tuple, trace_id: str, spans: list[Span]) -> None:
        """Learn the shape of this trace into ``shapes`` (while there is room)."""
        if self._learned < MAX_SHAPES:
            learned = self._learn(trace_id, spans)
            if learned is None:  # skewed clocks: try the next trace, a few times
                tried = (id(shapes), key)
                traces = self._tries.setdefault(tried, set())
                traces.add(trace_id)
                learned = _SCALAR if len(traces) >= LEARN_TRIES else None
            if learned is not None:
                shapes[key] = learned
                self._learned += 1

    def _learn(self, trace_id: str, spans: list[Span]) -> _Shape | None:
        """The shape of this trace from the scalar path's own decisions; :data:`_SCALAR`
        for a shape the batches cannot take, None to decide on a later trace."""
        known = conventions()
        for s in spans:
            for inside in (False, True):
                rule = known.match(s, inside)
                if rule is not None and rule.role == ENGINE_REQUEST:
                    return _SCALAR  # its sub-stages come from its attributes and times
        issues = Warnings()
        trace = prepare(trace_id, spans, issues, self.stage_map)
        if trace is None or trace.scalar_only or len(trace.order) != len(spans):
            return _SCALAR  # engine sub-stages, a cycle: decided by the shape
        if issues.any:
            return None  # clock skew in this trace: times, not the shape
        n = len(spans)
        if max(map(len, trace.children)) > MAX_KIDS:
            return _SCALAR
        edges = []
        for p in trace.order:
            remote = [c for c in trace.children[p] if spans[c].service != spans[p].service]
            if not remote:
                continue
            client = spans[p].kind == KIND_CLIENT
            if client and len(remote) > 1:
                return _SCALAR  # its hop goes to the longest callee: decided by times
            exempt = [
                spans[p].kind == KIND_PRODUCER or spans[c].kind == KIND_CONSUMER for c in remote
            ]
            edges.append((p, remote, client, exempt))
        groups: list[str] = []
        group_of = np.empty(n, np.int64)
        for i in range(n):
            name = group_key(trace, i, self.group_by)
            if name not in groups:
                groups.append(name)
            group_of[i] = groups.index(name)
        hops: list[tuple[str, str]] = []
        hop_of = np.full(n, -1, np.int64)
        for i, hop in enumerate(trace.hop):
            if hop is not None:
                if hop not in hops:
                    hops.append(hop)
                hop_of[i] = hops.index(hop)
        root = trace.root
        return _Shape(
            n=n,
            root=root,
            order=list(trace.order),
            parent=list(trace.parent),
            children=[list(c) for c in trace.children],
            kids=[
                [c for c in kids if trace.blocking is None or trace.blocking[c]]
                for kids in trace.children
            ],
            edges=edges,
            group_of=group_of,
            groups=groups,
            hop_of=hop_of,
            hops=hops,
            same_service=[i for i in range(n) if spans[i].service == spans[root].service],
            inference=[i for i in trace.order if trace.stage[i] == "inference"],
            carriers=[token_plan(spans[i].attributes, i) for i in token_carriers(trace)],
            root_service=spans[root].service,
            root_name=spans[root].name,
            stage=list(trace.stage),
            hop=list(trace.hop),
            blocking=trace.blocking,
            pack=struct.Struct(f"{3 * n}q").pack,
            nested=[
                (p, c)
                for p, remote, _, exempt in edges
                for c, skip in zip(remote, exempt, strict=True)
                if not skip
            ],
        )

    def _give_back(self, rows: tuple[list, ...], which: np.ndarray, n: int) -> None:
        """Attribute the traces ``which`` of a batch (of ``n`` spans each) the scalar way;
        those queued without their spans (a ticket alone) are read again first."""
        ids, seqs, last_ends, splits, _, spans = rows
        for r in which.tolist():
            kept = spans[r]
            if kept is None:
                if self._reread is None:
                    raise ValueError("a trace queued without its spans, and no way to read them")
                kept = self._reread(ids[r], seqs[r], last_ends[r], n)
            self._scalar(ids[r], kept, seqs[r], last_ends[r], splits[r])

    def _run(self, shape: _Shape) -> None:
        """Attribute the queued traces of ``shape`` (see the module docstring)."""
        b, n = len(shape.ids), shape.n
        self._queued -= b
        ids, seqs, last_ends, splits = shape.ids, shape.seqs, shape.last_ends, shape.splits
        tokens, spans, times, marked = shape.tokens, shape.spans, shape.times, shape.has
        shape.ids, shape.seqs, shape.last_ends, shape.splits = [], [], [], []
        shape.tokens, shape.spans, shape.times, shape.has = [], [], bytearray(), bytearray()
        # Each trace's row: its starts, then its ends, then its marks.
        at = np.frombuffer(times, np.int64).reshape(b, 3, n)
        start, end, marks = at[:, 0], at[:, 1], at[:, 2]
        has = np.frombuffer(marked, np.bool_).reshape(b, n)
        # Past 2**62 a sum or difference could leave int64: those traces go below.
        # (Not np.abs: it leaves -2**63 negative.)
        wide = ((at >= _LIMIT) | (at <= -_LIMIT)).any(axis=(1, 2))
        rows: tuple[list, ...] = (ids, seqs, last_ends, splits, tokens, spans)
        if wide.any():
            self._give_back(rows, np.nonzero(wide)[0], n)
            rest = np.nonzero(~wide)[0]
            if not rest.size:
                return
            start, end, marks, has = start[rest], end[rest], marks[rest], has[rest]
            rows = _pick(rows, rest)
        # Only ends are widened: a trace whose spans must shift goes to the scalar path.
        skewed = fix_clocks(shape, start, end)
        if skewed.any():
            self._give_back(rows, np.nonzero(skewed)[0], n)
            keep = np.nonzero(~skewed)[0]
            if not keep.size:
                return
            start, end, marks, has = start[keep], end[keep], marks[keep], has[keep]
            rows = _pick(rows, keep)
        ids, seqs, last_ends, splits, tokens, spans = rows
        root = shape.root
        own = own_times(shape, start, end, None)
        # Time to first token: the root's mark, else the earliest on its service.
        point = marks[:, root].copy()
        found = has[:, root].copy()
        if len(shape.same_service) > 1:
            same, same_has = marks[:, shape.same_service], has[:, shape.same_service]
            earliest = np.where(same_has, same, np.iinfo(np.int64).max).min(axis=1)
            point = np.where(found, point, earliest)
            found |= same_has.any(axis=1)
        has_ttft = found & (start[:, root] < point)
        point = np.where(found, np.minimum(point, end[:, root]), end[:, root])
        ttft_own = None
        if has_ttft.any():
            view_end, included = ttft_view(shape, start, end, marks, has, point)
            ttft_own = own_times(shape, start, view_end, included)
            ttft_own[~has_ttft] = 0
        model_ttft = np.full(len(ids), _NO, np.int64)
        for i in shape.inference:  # the last in top-down order with a mark: the innermost
            gap = np.maximum(marks[:, i] - start[:, i], 0)
            model_ttft = np.where(has[:, i], gap, model_ttft)
        width = len(shape.groups)
        projected = None
        if self.projection is not None:
            # The what-if retiming is the scalar path's own, on the trace the scalar path
            # would prepare: the shape's tree and stages, the batch's (widened) times.
            row_starts: list[list[int]] = start.tolist()
            row_ends: list[list[int]] = end.tolist()
            # A projection keeps every trace's spans (Attributor.early takes no ticket).
            kept = cast(list[list[Span]], spans)
            projected = [
                self.projection(
                    PreparedTrace(
                        ids[r],
                        kept[r],
                        root,
                        shape.parent,
                        shape.children,
                        row_starts[r],
                        row_ends[r],
                        shape.stage,
                        shape.hop,
                        shape.order,
                        blocking=shape.blocking,
                    )
                )
                for r in range(len(ids))
            ]
        self._table().add_rows(
            ids,
            seqs,
            last_ends,
            splits,
            tokens,
            start=start[:, root],
            e2e=end[:, root] - start[:, root],
            span_count=n,
            ttft=np.where(has_ttft, point - start[:, root], _NO),
            model_ttft=model_ttft,
            root=(shape.root_service, shape.root_name),
            groups=(shape.groups, sums(own, shape.group_of, width)),
            ttft_groups=None if ttft_own is None else sums(ttft_own, shape.group_of, width),
            hops=(shape.hops, sums(own, shape.hop_of, len(shape.hops))),
            projected=projected,
        )


_NO_TOKENS: tuple[None, None, None, None] = (None, None, None, None)


def _pick(rows: tuple[list, ...], which: np.ndarray) -> tuple[list, ...]:
    """The entries ``which`` of each per-trace list of a batch."""
    at = which.tolist()
    return tuple([column[r] for r in at] for column in rows)
