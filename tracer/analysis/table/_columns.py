"""The column storage behind :class:`~tracer.analysis.table._table.TraceTable`: the what-if
projection columns, the columns kept empty while every row has their default, and
:class:`Columns`, the sorted numpy view that aggregation consumes (interned names and
sparse rows are in :mod:`tracer.analysis.table._sparse`)."""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from tracer.analysis.model.breakdown import TraceBreakdown
from tracer.analysis.table._ids import TraceIds
from tracer.analysis.table._sparse import _Names, _Sparse

__all__ = ["Columns", "Entries", "Projected", "ProjectedColumns"]

_NONE = -1  # None in an int column (times to first token and token counts are >= 0)


class Projected(NamedTuple):
    """One trace's what-if projection (:class:`~tracer.analysis.whatif.retime.Projection`)."""

    after_ns: float
    ttft: tuple[int, float] | None  # time to first token before, after
    has_stage: bool
    before_groups: dict[str, int]
    after_groups: dict[str, float]


class _Projections:
    """The what-if columns of a table's rows."""

    __slots__ = ("after", "after_groups", "before_groups", "has_stage", "ttft_after", "ttft_before")

    def __init__(self, names: _Names) -> None:
        self.after = array("d")
        self.ttft_before = array("q")
        self.ttft_after = array("d")
        self.has_stage = array("b")
        self.before_groups = _Sparse(names)
        self.after_groups = _Sparse(names, "d")

    def add(self, p: Projected) -> None:
        self.after.append(p.after_ns)
        self.ttft_before.append(_NONE if p.ttft is None else p.ttft[0])
        self.ttft_after.append(0.0 if p.ttft is None else p.ttft[1])
        self.has_stage.append(p.has_stage)
        self.before_groups.add(p.before_groups)
        self.after_groups.add(p.after_groups)

    def extend(self, other: _Projections, remap: np.ndarray) -> None:
        for name in ("after", "ttft_before", "ttft_after", "has_stage"):
            getattr(self, name).extend(getattr(other, name))
        self.before_groups.extend(other.before_groups, remap)
        self.after_groups.extend(other.after_groups, remap)


Flat = tuple[np.ndarray, np.ndarray, np.ndarray]


class Entries(NamedTuple):
    """Sparse rows as arrays: row ``r``'s (name index, value) entries are
    ``keys[ends[r - 1]:ends[r]]`` and ``values[...]`` (``ends``: one int64 a row)."""

    ends: np.ndarray
    keys: np.ndarray
    values: np.ndarray

    def flat(self) -> Flat:
        """(row of each entry, name index, value): the row index is made on each call
        (four bytes an entry), not kept."""
        counts = np.diff(self.ends, prepend=0)
        return np.repeat(np.arange(self.ends.size, dtype=np.int32), counts), *self[1:]

    def subset(self, keep: np.ndarray) -> Entries:
        """The rows ``keep`` (a boolean per row) marks."""
        counts = np.diff(self.ends, prepend=0)
        mine = np.repeat(keep, counts)
        return Entries(np.cumsum(counts[keep]), self.keys[mine], self.values[mine])


@dataclass(frozen=True)
class ProjectedColumns:
    """The what-if columns, in the order of :class:`Columns`' rows (ns)."""

    after_ns: np.ndarray
    ttft_before_ns: np.ndarray  # -1: no time to first token
    ttft_after_ns: np.ndarray
    has_stage: np.ndarray
    before_groups: tuple[np.ndarray, np.ndarray, np.ndarray]
    after_groups: tuple[np.ndarray, np.ndarray, np.ndarray]

    def subset(self, keep: np.ndarray, position: np.ndarray) -> ProjectedColumns:
        """The rows ``keep`` marks; ``position`` is each kept row's new index."""
        return ProjectedColumns(
            self.after_ns[keep],
            self.ttft_before_ns[keep],
            self.ttft_after_ns[keep],
            self.has_stage[keep],
            _subset_sparse(self.before_groups, position),
            _subset_sparse(self.after_groups, position),
        )


@dataclass(frozen=True)
class Columns:
    """A table's rows as numpy arrays, sorted by start time and trace id, dropped rows
    left out: what :func:`~tracer.analysis.aggregate.aggregate` consumes. ``ids`` reads
    as an object array of the trace ids (:class:`~tracer.analysis.table._ids.TraceIds`, 16
    bytes a row, when every id is of 32 lowercase hex digits)."""

    ids: TraceIds | np.ndarray
    start_ns: np.ndarray
    e2e_ns: np.ndarray
    span_count: np.ndarray
    ttft_ns: np.ndarray
    model_ttft_ns: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    model: np.ndarray
    root_service: np.ndarray
    root_name: np.ndarray
    strings: list[str | None]
    #: Each row's group, TTFT-group and hop times (ns) by name index.
    group_entries: Entries
    group_names: list[str]
    ttft_entries: Entries
    hop_entries: Entries
    hop_names: list[tuple[str, str]]
    seq: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    last_end: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    #: Each row's ``--split-by`` value (an index into ``strings``; -1 without one).
    split: np.ndarray | None = None
    projected: ProjectedColumns | None = None
    #: Cached prompt tokens and a P/D coordinator's time to first token (-1: none).
    cached_tokens: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    coordinator_ttft_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    #: Each row's weight (what a sampled trace stands for); None: every weight is 1.
    weight: np.ndarray | None = None
    #: Which rows' weights cannot be known (they count once); None: none.
    weight_unknown: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.e2e_ns.size)

    @property
    def groups(self) -> Flat:
        """(row, group index, ns) of every group time; see :meth:`Entries.flat`."""
        return self.group_entries.flat()

    @property
    def ttft_groups(self) -> Flat:
        """(row, group index, ns) of every group time before the first token."""
        return self.ttft_entries.flat()

    @property
    def hops(self) -> Flat:
        """(row, hop index, ns) of every hop's network time."""
        return self.hop_entries.flat()

    def subset(self, keep: np.ndarray) -> Columns:
        """The rows ``keep`` (a boolean per row) marks, in the same order."""
        position = np.full(len(self), -1, np.int64)
        position[keep] = np.arange(int(keep.sum()))

        def col(a: np.ndarray) -> np.ndarray:
            return a[keep] if a.size == keep.size else a

        return Columns(
            ids=self.ids[keep],
            start_ns=self.start_ns[keep],
            e2e_ns=self.e2e_ns[keep],
            span_count=self.span_count[keep],
            ttft_ns=self.ttft_ns[keep],
            model_ttft_ns=self.model_ttft_ns[keep],
            input_tokens=self.input_tokens[keep],
            output_tokens=self.output_tokens[keep],
            model=self.model[keep],
            root_service=self.root_service[keep],
            root_name=self.root_name[keep],
            strings=self.strings,
            group_entries=self.group_entries.subset(keep),
            group_names=self.group_names,
            ttft_entries=self.ttft_entries.subset(keep),
            hop_entries=self.hop_entries.subset(keep),
            hop_names=self.hop_names,
            seq=col(self.seq),
            last_end=col(self.last_end),
            split=None if self.split is None else self.split[keep],
            projected=None if self.projected is None else self.projected.subset(keep, position),
            cached_tokens=col(self.cached_tokens),
            coordinator_ttft_ns=col(self.coordinator_ttft_ns),
            weight=_kept(self.weight, keep, 1.0),
            weight_unknown=_kept(self.weight_unknown, keep, False),
        )

    def breakdowns(self) -> Iterator[TraceBreakdown]:
        """The rows as :class:`TraceBreakdown` objects, in order."""
        strings = self.strings
        groups, ttft_groups, hops = (
            _rows(s, n, len(self))
            for s, n in (
                (self.groups, self.group_names),
                (self.ttft_groups, self.group_names),
                (self.hops, self.hop_names),
            )
        )
        cached, coordinator = self.cached_tokens, self.coordinator_ttft_ns
        full = cached.size == len(self) and coordinator.size == len(self)
        for r in range(len(self)):
            ttft = int(self.ttft_ns[r])
            yield TraceBreakdown(
                trace_id=str(self.ids[r]),
                root_service=strings[self.root_service[r]],  # type: ignore[arg-type]
                root_name=strings[self.root_name[r]],  # type: ignore[arg-type]
                start_ns=int(self.start_ns[r]),
                e2e_ns=int(self.e2e_ns[r]),
                groups=groups[r],
                hops=hops[r],
                ttft_ns=None if ttft == _NONE else ttft,
                ttft_groups=None if ttft == _NONE else ttft_groups[r],
                model_ttft_ns=_opt(int(self.model_ttft_ns[r])),
                input_tokens=_opt(int(self.input_tokens[r])),
                output_tokens=_opt(int(self.output_tokens[r])),
                model=strings[self.model[r]],
                span_count=int(self.span_count[r]),
                cached_tokens=_opt(int(cached[r])) if full else None,
                coordinator_ttft_ns=_opt(int(coordinator[r])) if full else None,
            )


def _kept(column: np.ndarray | None, keep: np.ndarray, usual: object) -> np.ndarray | None:
    """The rows ``keep`` marks of an optional column; None when all are ``usual``."""
    if column is None:
        return None
    out = column[keep]
    return out if (out != usual).any() else None


def _subset_sparse(
    flat: tuple[np.ndarray, np.ndarray, np.ndarray], position: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows, keys, values = flat
    new = position[rows]
    mine = new >= 0
    return new[mine], keys[mine], values[mine]


def _rows(flat: tuple[np.ndarray, np.ndarray, np.ndarray], names: list, n: int) -> list[dict]:
    out: list[dict] = [{} for _ in range(n)]
    for r, k, v in zip(*(a.tolist() for a in flat), strict=True):
        out[r][names[k]] = v
    return out


def _npd(col: array) -> np.ndarray:
    return np.frombuffer(col, np.float64) if len(col) else np.zeros(0, np.float64)


def _opt(value: int) -> int | None:
    return None if value == _NONE else value


def _np(col: array) -> np.ndarray:
    return np.frombuffer(col, np.int64) if len(col) else np.zeros(0, np.int64)


def _np32(col: array) -> np.ndarray:
    return np.frombuffer(col, np.int32) if len(col) else np.zeros(0, np.int32)


def _move(table: object, other: object, name: str) -> None:
    """Append ``other``'s column ``name`` to ``table``'s and free it there, so that a
    merge holds one column twice at most."""
    column = getattr(other, name)
    getattr(table, name).extend(column)
    setattr(other, name, bytearray() if type(column) is bytearray else array(column.typecode))


#: Columns most rows leave at their default (no cached tokens, no P/D coordinator, no
#: --split-by value, full data): kept empty until a row differs, then filled with the
#: default up to that row (``_put``), which saves about 30 bytes a trace.
_DEFAULTS: dict[str, int | float] = {
    "_cached": _NONE,
    "_coordinator_ttft": _NONE,
    "_split": _NONE,
    "_weight": 1.0,
    "_unknown": 0,
}


def _fill(table: object, name: str, rows: int) -> array | bytearray:
    """``table``'s column ``name``, filled with its default up to ``rows`` if empty."""
    column = getattr(table, name)
    if not len(column) and rows:
        if type(column) is bytearray:
            column.extend(bytes(rows))
        else:
            column.extend(array(column.typecode, [_DEFAULTS[name]]) * rows)
    return column


def _put(table: object, row: int, name: str, values: list) -> None:
    """Append ``values`` (rows ``row`` on) to the column ``name`` of :data:`_DEFAULTS`:
    nothing while it is empty and they are all the default."""
    column = getattr(table, name)
    if len(column) or values.count(_DEFAULTS[name]) != len(values):
        _fill(table, name, row).extend(values)


def _move_lazy(table: object, other: object, name: str, base: int, rows: int) -> None:
    """:func:`_move` for a column of :data:`_DEFAULTS` (``base`` and ``rows``: the two
    tables' row counts): still empty when both are."""
    if len(getattr(table, name)) or len(getattr(other, name)):
        _fill(table, name, base)
        _fill(other, name, rows)
        _move(table, other, name)
