"""Attribution of traces that share a shape, a batch at a time over arrays.

Most traces of a service come in a few shapes: the same spans under the same parents,
with the same decisions to make. :mod:`tracer.analysis.attribution.shapes` learns a
shape from the scalar path's own decisions on its first trace, and the key later
traces must match from what those decisions read. Traces of a known shape are queued;
a batch's clock corrections, both critical-path walks (end to end and to the first
token), group and hop sums and table rows are then computed over (traces x spans)
int64 arrays with numpy, one step per span of the shape instead of one per span of
every trace.

The arithmetic is the scalar path's, step for step (:mod:`tracer.analysis.attribution.walks`:
the dependency model's walk, ``ttft_view``, ``prepare._fix_clocks`` over arrays; the
rest of ``breakdown.break_down`` here), on the same nanoseconds, so a row is the row
the scalar path adds (``tests/analysis/test_shapes.py`` and
``tests/analysis/test_batch_differential.py`` compare them; ``HOPTRACE_BATCH=off``
runs the scalar path alone). An engine request span's phases are computed per trace
by the scalar path's ``engine_intervals`` and walked as spans of the shape. A trace
whose clocks must be corrected (a child outside its remote parent: the scalar path
shifts subtrees and counts them) is given back to the scalar path, as is every trace
of a shape the batches cannot take: a parent cycle, a CLIENT span with more than one
remote child, duplicate span ids, more than one root.

With a what-if projection (``whatif``, ``report --speedup``), each batched trace is
also retimed by the scalar projection itself, on the :class:`PreparedTrace` the scalar
path would build: the shape's tree, stages and hops with the batch's (widened) times.
Only ``prepare`` and the breakdown are saved per trace there; the retiming stays the
scalar arithmetic (floats in the same order).
"""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Callable
from operator import eq
from typing import Any, Literal, NamedTuple, TypeAlias, cast

import numpy as np

from tracer.analysis.attribution.shapes import (
    MAX_SPANS,
    QUEUED,
    SCALAR,
    ByPhases,
    ByValues,
    Shape,
    learn,
    phases_of,
    values_at,
)
from tracer.analysis.attribution.walks import fix_clocks, own_times, sums, ttft_view
from tracer.analysis.attribution.words import words as _words
from tracer.analysis.conventions.phases import coordinator_ttft_ns
from tracer.analysis.model.breakdown import TOKEN_COLUMNS, Tokens, count_planned
from tracer.analysis.model.prepare import PreparedTrace, StageMap, phase_span
from tracer.analysis.sampling.weights import FULL, trace_weight
from tracer.analysis.table._table import Projected, TraceTable
from tracer.analysis.table.schema import ROW
from tracer.spans.model import Span

__all__ = ["BATCH", "Answer", "ShapeBatcher", "Ticket", "batching"]

#: Traces of one shape attributed together.
BATCH = 1024
#: Shapes remembered; traces of further shapes take the scalar path.
MAX_SHAPES = 512
#: Traces queued over all shapes before every batch is run.
MAX_QUEUED = 8192
#: Traces of a shape tried before it is left to the scalar path (each had clocks to
#: shift, so the shape could not be learned from it).
LEARN_TRIES = 8
_NO = -1  # no time (a table column's None)
#: Times and marks the batches take are under this in magnitude, so that the walks'
#: sums and differences stay inside int64; a trace with one past it (or past int64,
#: which Python's ints hold) takes the scalar path.
_LIMIT = 2**62
#: The high byte of each machine word, and the high bytes of words surely inside
#: (-_LIMIT, _LIMIT): a trace whose words all have one is not too wide for ``_run``
#: (a few just inside, from -2**62 to -2**62 + 2**56, count as wide: their spans are
#: kept, which is always safe).
_HIGH = 7 if sys.byteorder == "little" else 0
_NARROW = bytes(range(0x40)) + bytes(range(0xC1, 0x100))
_NO_TOKENS: Tokens = (None, None, None, None)
#: The queued values that are the table's columns as they are (by the same name).
_QUEUED_COLUMNS = tuple(name for name in QUEUED if name in {c.name for c in ROW})


def batching() -> bool:
    """Whether traces are batched: ``HOPTRACE_BATCH=off`` runs the scalar path alone
    (the reference the batches must agree with)."""
    return os.environ.get("HOPTRACE_BATCH", "on").strip().lower() not in ("off", "0", "no", "false")


class Ticket(NamedTuple):
    """What :meth:`ShapeBatcher.ticket` works out for a trace: its shape, its times
    and marks as machine words, which spans have marks, its token counts, and whether
    the batch could give it back."""

    shape: Shape
    times: bytes
    has: bytes
    tokens: Tokens
    #: the batch cannot give the trace back (its spans need not be kept)
    settled: bool
    #: what the trace stands for and whether that is known (weights.trace_weight)
    weight: tuple[float, bool]
    #: the P/D coordinator's own time to first token (phases.coordinator_ttft_ns)
    coordinator_ttft: int | None


#: :meth:`ShapeBatcher.ticket`'s answer: a ticket, False (the scalar path attributes
#: the trace) or None (its shape is not known yet).
Answer: TypeAlias = "Ticket | Literal[False] | None"


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
    ) -> None:
        self.group_by = group_by
        self.stage_map = stage_map
        self.projection = projection
        self._table = table
        self._scalar = scalar
        self._batch = batch
        # key -> Shape, SCALAR, or a ByValues / ByPhases that tells shapes apart
        self._shapes: dict[tuple, Any] = {}
        self._learned = 0
        # Traces tried per shape (a trace may be tried twice: once at the stream's
        # second look, once when it is complete; it counts once).
        self._tries: dict[tuple, set[str]] = {}
        self._queued = 0

    def offer(
        self, trace_id: str, spans: list[Span], seq: int, last_end: int, split: str | None
    ) -> bool:
        """Queue the trace (True), or False: the caller attributes it the scalar way."""
        ticket = self.ticket(trace_id, spans, learn=True)
        if not ticket:
            return False
        shape = ticket.shape
        q = shape.queue
        q["trace_id"].append(trace_id)
        q["seq"].append(seq)
        q["last_end"].append(last_end)
        q["split"].append(split)
        shape.times += ticket.times  # a copy of machine words: no span is touched
        shape.has.extend(ticket.has)
        q["tokens"].append(ticket.tokens)
        q["weights"].append(ticket.weight)
        q["coordinator_ttft_ns"].append(ticket.coordinator_ttft)
        # Its spans are kept only while the batch may give the trace back (or retime it).
        keep = self.projection is not None or not ticket.settled
        q["spans"].append(spans if keep else None)
        self._queued += 1
        if len(q["trace_id"]) >= self._batch:
            self._run(shape)
        elif self._queued >= MAX_QUEUED:
            self.flush()
        return True

    def ticket(self, trace_id: str, spans: list[Span], learn: bool = False) -> Answer:
        """What :meth:`offer` queues for this trace, worked out from its spans: its
        shape, its times and marks as machine words, its token counts. False: the
        scalar path attributes it; None (``learn=False``): its shape is not known yet."""
        n = len(spans)
        if n > MAX_SPANS or n == 0:
            return False
        words = _words(spans)
        if words is None:
            return False  # a duplicate span id
        key, packed, has, weighted = words
        parents = key[0]
        entry = self._shapes.get(key)
        # A key is kept only once its parents passed this check: a known one did.
        if entry is None and (parents.count(-1) != 1 or any(map(eq, parents, range(n)))):
            return False  # orphans to re-parent, every span in a cycle, its own parent
        phases: list[tuple[str, int, int]] = []
        if type(entry) is ByValues:  # decisions read attribute values
            entry = entry.shapes.get(values_at(entry.slots, spans))
        if type(entry) is ByPhases:  # engine spans: their phases, per trace
            phases = phases_of(entry.engines, spans)
            entry = entry.shapes.get(tuple([sub for sub, _, _ in phases]))
        if entry is None:
            if learn:
                self._new(key, trace_id, spans)
            return False if learn else None  # the first trace of a shape: scalar
        if entry is SCALAR:
            return False
        shape = cast(Shape, entry)
        if packed is None:  # a time or mark past int64 (Python's ints hold any)
            return False
        times = packed
        if phases:
            try:
                lo = struct.pack(f"{len(phases)}q", *[lo for _, lo, _ in phases])
                hi = struct.pack(f"{len(phases)}q", *[hi for _, _, hi in phases])
            except struct.error:
                return False
            times = b"".join(
                (packed[: 8 * n], lo, packed[8 * n : 16 * n], hi, packed[16 * n :], bytes(len(lo)))
            )
            has += bytes(len(phases))
        tokens = count_planned(spans, shape.carriers) if shape.carriers else _NO_TOKENS
        weight = trace_weight(spans, spans[shape.root]) if shape.sampled or weighted else FULL
        # Whether the batch cannot give this trace back: no time or mark too wide for
        # the arrays (see _NARROW) and every remote child inside its parent's time
        # (fix_clocks then only widens ends, and a child inside is never skewed).
        settled = not times[_HIGH::8].translate(None, _NARROW)
        if settled and shape.nested:
            word = memoryview(packed).cast("q")  # starts, then ends
            for p, c in shape.nested:
                if word[c] < word[p] or word[n + c] > word[n + p]:
                    settled = False
                    break
        at = shape.coordinator
        coordinator = None if at < 0 else coordinator_ttft_ns(spans[at])
        return Ticket(shape, times, has, tokens, settled, weight, coordinator)

    def flush(self) -> None:
        """Attribute every queued trace."""
        for entry in self._shapes.values():
            self._flush(entry)

    def _flush(self, entry: Any) -> None:
        if type(entry) is Shape:
            if entry.queue["trace_id"]:
                self._run(entry)
        elif type(entry) is ByValues or type(entry) is ByPhases:
            for shape in entry.shapes.values():
                self._flush(shape)

    def _new(self, key: tuple, trace_id: str, spans: list[Span]) -> None:
        """Learn the shape of this trace under ``key`` (while there is room)."""
        if self._learned >= MAX_SHAPES:
            return
        learned = learn(trace_id, spans, self.group_by, self.stage_map)
        if learned is None:  # skewed clocks: try the next trace, a few times
            traces = self._tries.setdefault(key, set())
            traces.add(trace_id)
            if len(traces) >= LEARN_TRIES and key not in self._shapes:
                self._shapes[key] = SCALAR
                self._learned += 1
            return
        self._learned += 1
        if learned is SCALAR:
            self._shapes.setdefault(key, SCALAR)
            return
        shape, slots, engines = learned
        entry = self._shapes.get(key)
        old = entry.slots if type(entry) is ByValues else []
        if slots and not set(slots) <= set(old):
            # These values sent the decisions to read more: the shapes told apart by the
            # old slots are run, and from now on shapes are told apart by all of them.
            if entry is not None:
                self._flush(entry)
            entry = self._shapes[key] = ByValues(sorted(set(old) | set(slots)))
        if type(entry) is ByValues:
            at, values = entry.shapes, values_at(entry.slots, spans)
            entry = at.get(values)
        else:
            at, values = self._shapes, key
        if not engines:
            at.setdefault(values, shape)
            return
        if entry is None:
            entry = at[values] = ByPhases(engines)
        if type(entry) is ByPhases and entry.engines == engines:
            entry.shapes.setdefault(tuple([sub for _, sub in shape.phases]), shape)

    def _give_back(self, rows: dict[str, list], which: np.ndarray) -> None:
        """Attribute the traces ``which`` of a batch (its :data:`QUEUED` lists) the
        scalar way (their spans were kept: :attr:`Ticket.settled`)."""
        ids, spans, seqs = rows["trace_id"], rows["spans"], rows["seq"]
        last_ends, splits = rows["last_end"], rows["split"]
        for r in which.tolist():
            kept = spans[r]
            if kept is None:
                raise AssertionError(f"trace {ids[r]} was given back without its spans")
            self._scalar(ids[r], kept, seqs[r], last_ends[r], splits[r])

    def _run(self, shape: Shape) -> None:
        """Attribute the queued traces of ``shape`` (see the module docstring)."""
        rows, times, marked = shape.queue, shape.times, shape.has
        b, n = len(rows["trace_id"]), shape.n
        self._queued -= b
        shape.queue = {k: [] for k in QUEUED}
        shape.times, shape.has = bytearray(), bytearray()
        # Each trace's row: its starts, then its ends, then its marks.
        at = np.frombuffer(times, np.int64).reshape(b, 3, n)
        start, end, marks = at[:, 0], at[:, 1], at[:, 2]
        has = np.frombuffer(marked, np.bool_).reshape(b, n)
        # Past 2**62 a sum or difference could leave int64: those traces go below.
        # (Not np.abs: it leaves -2**63 negative.)
        wide = ((at >= _LIMIT) | (at <= -_LIMIT)).any(axis=(1, 2))
        if wide.any():
            self._give_back(rows, np.nonzero(wide)[0])
            rest = np.nonzero(~wide)[0]
            if not rest.size:
                return
            start, end, marks, has = start[rest], end[rest], marks[rest], has[rest]
            rows = _pick(rows, rest)
        # Only ends are widened (of CLIENT spans, never an engine span whose phases were
        # read from its times): a trace whose spans must shift goes to the scalar path.
        skewed = fix_clocks(shape, start, end)
        if skewed.any():
            self._give_back(rows, np.nonzero(skewed)[0])
            keep = np.nonzero(~skewed)[0]
            if not keep.size:
                return
            start, end, marks, has = start[keep], end[keep], marks[keep], has[keep]
            rows = _pick(rows, keep)
        ids, spans = rows["trace_id"], rows["spans"]
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
            # A projection keeps every trace's spans (see offer).
            kept = cast(list[list[Span]], spans)
            projected = [
                self.projection(
                    PreparedTrace(
                        ids[r],
                        self._with_phases(shape, kept[r], row_starts[r], row_ends[r]),
                        root,
                        shape.parent,
                        shape.children,
                        row_starts[r],
                        row_ends[r],
                        shape.stage,
                        shape.hop,
                        shape.order,
                        synthetic=shape.n - shape.spans_in,
                        blocking=shape.blocking,
                    )
                )
                for r in range(len(ids))
            ]
        columns: dict[str, Any] = {
            "start_ns": start[:, root],
            "e2e_ns": end[:, root] - start[:, root],
            "span_count": shape.spans_in,
            "ttft_ns": np.where(has_ttft, point - start[:, root], _NO),
            "model_ttft_ns": model_ttft,
            "root_service": shape.root_service,
            "root_name": shape.root_name,
            **{name: rows[name] for name in _QUEUED_COLUMNS},  # as they were queued
            "weight": [w for w, _ in rows["weights"]],
            "weight_unknown": [not known for _, known in rows["weights"]],
            "group_entries": (shape.groups, sums(own, shape.group_of, width), None),
            "hop_entries": (shape.hops, sums(own, shape.hop_of, len(shape.hops)), None),
        }
        if ttft_own is not None:
            columns["ttft_entries"] = (
                shape.groups,
                sums(ttft_own, shape.group_of, width),
                has_ttft,
            )
        # each trace's token counts (a tuple each) as the columns they are
        columns.update(
            zip(TOKEN_COLUMNS, map(list, zip(*rows["tokens"], strict=True)), strict=True)
        )
        columns.update(shape.filled)  # the shape's, one value for every trace
        self._table().add_rows(ids, columns, projected)

    @staticmethod
    def _with_phases(
        shape: Shape, spans: list[Span], start: list[int], end: list[int]
    ) -> list[Span]:
        """The trace's spans and, after them, its engine phases as the scalar path adds
        them."""
        if not shape.phases:
            return spans
        first = shape.spans_in
        return spans + [
            phase_span(spans[e], sub, start[k], end[k])
            for k, (e, sub) in enumerate(shape.phases, first)
        ]


def _pick(rows: dict[str, list], which: np.ndarray) -> dict[str, list]:
    """The entries ``which`` of each per-trace list of a batch."""
    at = which.tolist()
    return {name: [column[r] for r in at] for name, column in rows.items()}
