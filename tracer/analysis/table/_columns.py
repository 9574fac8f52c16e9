"""The column storage behind :class:`~tracer.analysis.table._table.TraceTable`: the what-if
projection columns, the columns kept empty while every row has their default, and
:class:`Columns`, the sorted numpy view that aggregation consumes (interned names and
sparse rows are in :mod:`tracer.analysis.table._sparse`)."""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from tracer.analysis.model.breakdown import TraceBreakdown
from tracer.analysis.table._ids import TraceIds
from tracer.analysis.table._sparse import _Names, _Sparse
from tracer.analysis.table.schema import FILLED, NONE, PROJECTED, ROW, Column

__all__ = ["Columns", "Entries", "Projected", "ProjectedColumns"]

_NONE = NONE  # (the name the table's modules use)


class Projected(NamedTuple):
    """One trace's what-if projection (:class:`~tracer.analysis.whatif.retime.Projection`):
    a value for each column of :data:`~tracer.analysis.table.schema.PROJECTED`."""

    after_ns: float
    ttft_before_ns: int | None  # time to first token before (None: no first token)
    ttft_after_ns: float | None  # and after
    has_stage: bool
    before_groups: dict[str, int]
    after_groups: dict[str, float]


_PROJECTED_FLAT = tuple(c for c in PROJECTED if c.layout != "sparse")
_PROJECTED_SPARSE = tuple(c for c in PROJECTED if c.layout == "sparse")


class _Projections:
    """The what-if columns of a table's rows: an attribute per column of
    :data:`~tracer.analysis.table.schema.PROJECTED`."""

    def __init__(self, names: _Names) -> None:
        for c in _PROJECTED_FLAT:
            setattr(self, c.name, empty(c))
        for c in _PROJECTED_SPARSE:
            setattr(self, c.name, _Sparse(names, c.code))

    def add(self, p: Projected) -> None:
        for c in _PROJECTED_FLAT:
            value = getattr(p, c.name)
            getattr(self, c.name).append(c.default if value is None else value)
        for c in _PROJECTED_SPARSE:
            getattr(self, c.name).add(getattr(p, c.name))

    def __len__(self) -> int:
        return len(getattr(self, PROJECTED[0].name))

    def extend(self, other: _Projections, remap: np.ndarray) -> None:
        for c in _PROJECTED_FLAT:
            getattr(self, c.name).extend(getattr(other, c.name))
        for c in _PROJECTED_SPARSE:
            getattr(self, c.name).extend(getattr(other, c.name), remap)


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
        kept: dict[str, Any] = {
            c.name: _subset_sparse(getattr(self, c.name), position)
            if c.layout == "sparse"
            else getattr(self, c.name)[keep]
            for c in PROJECTED
        }
        return ProjectedColumns(**kept)


class Columns:
    """A table's rows as numpy arrays, sorted by start time and trace id, dropped rows
    left out: what :func:`~tracer.analysis.aggregate.aggregate` consumes.

    Each column of :data:`~tracer.analysis.table.schema.ROW` is an attribute of its
    name: a numpy array (a sparse column's :class:`Entries`), or None for a lazy
    column its ``absent`` rule leaves out. Besides them: ``ids`` (an object array of the
    trace ids, or :class:`~tracer.analysis.table._ids.TraceIds`, 16 bytes a row, when
    every id is of 32 lowercase hex digits), ``strings`` (what the string columns'
    indexes name), ``group_names`` and ``hop_names`` (what the sparse columns' keys
    name) and ``projected`` (the what-if columns, or None). Read-only."""

    ids: TraceIds | np.ndarray
    strings: list[str | None]
    group_names: list[str]
    hop_names: list[tuple[str, str]]
    projected: ProjectedColumns | None
    # The columns the analysis reads by name, as the type checker sees them (each is
    # set from the schema: a column the schema adds is an attribute without a line here).
    start_ns: np.ndarray
    e2e_ns: np.ndarray
    span_count: np.ndarray
    ttft_ns: np.ndarray  # -1: none
    coordinator_ttft_ns: np.ndarray
    model_ttft_ns: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    cached_tokens: np.ndarray
    model: np.ndarray
    root_service: np.ndarray
    root_name: np.ndarray
    #: each row's ``--split-by`` value (an index into ``strings``; None: not every row has one)
    split: np.ndarray | None
    seq: np.ndarray
    last_end: np.ndarray
    #: each row's weight (what a sampled trace stands for); None: every weight is 1
    weight: np.ndarray | None
    #: which rows' weights cannot be known (they count once); None: none
    weight_unknown: np.ndarray | None
    #: each row's group, TTFT-group and hop times (ns) by name index
    group_entries: Entries
    ttft_entries: Entries
    hop_entries: Entries

    def __init__(
        self,
        ids: TraceIds | np.ndarray,
        strings: list[str | None],
        group_names: list[str],
        hop_names: list[tuple[str, str]],
        projected: ProjectedColumns | None = None,
        **columns: Any,
    ) -> None:
        """``columns``: a value for every column of the schema, by name."""
        missing = [c.name for c in ROW if c.name not in columns]
        unknown = sorted(set(columns) - _NAMES)
        if missing or unknown:
            raise TypeError(f"not the schema's columns: {missing} missing, {unknown} unknown")
        put = object.__setattr__
        put(self, "ids", ids)
        put(self, "strings", strings)
        put(self, "group_names", group_names)
        put(self, "hop_names", hop_names)
        put(self, "projected", projected)
        for name, value in columns.items():
            put(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Columns are read-only (cannot set {name!r})")

    def __len__(self) -> int:
        return int(self.e2e_ns.size)

    def replace(self, **changes: Any) -> Columns:
        """These columns with ``changes`` (values by name, as :class:`Columns` takes them)."""
        return Columns(**{**vars(self), **changes})

    def column(self, c: Column) -> Any:
        """The values of column ``c`` (see the class docstring)."""
        return getattr(self, c.name)

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
        kept: dict[str, Any] = {}
        for c in ROW:
            value = self.column(c)
            if c.layout == "sparse":
                kept[c.name] = value.subset(keep)
            elif c.absent == "any":
                kept[c.name] = _kept(value, keep, c.lazy_value)
            elif value is not None and value.size == keep.size:
                kept[c.name] = value[keep]
            else:  # None, or left empty by whoever made these columns
                kept[c.name] = value
        return Columns(
            ids=self.ids[keep],
            strings=self.strings,
            group_names=self.group_names,
            hop_names=self.hop_names,
            projected=None if self.projected is None else self.projected.subset(keep, position),
            **kept,
        )

    def breakdowns(self) -> Iterator[TraceBreakdown]:
        """The rows as :class:`TraceBreakdown` objects, in order (the values of the
        columns a function of the trace gives in their ``filled``)."""
        n, strings = len(self), self.strings
        names: dict[str, list] = {"group": self.group_names, "hop": self.hop_names}
        fields: dict[str, list] = {}
        for c in ROW:
            if c.source == "row":
                continue
            value = self.column(c)
            values: list[Any]
            if c.layout == "sparse":
                values = _rows(value.flat(), names[c.keys], n)
            elif value is None:  # (a lazy column every row leaves at its usual value)
                values = [None if c.lazy_value == NONE else c.lazy_value] * n
            elif value.size != n:  # (not kept by whoever made these columns)
                values = [None] * n
            elif c.strings:
                values = [strings[i] for i in value.tolist()]
            elif c.default == NONE:
                values = [None if v == NONE else v for v in value.tolist()]
            else:
                values = value.tolist()
            fields[c.name if c.fill is not None else c.field] = values
        for c in ROW:
            if c.requires:  # None with the value it goes with
                fields[c.requires] = [
                    None if v is None else g
                    for v, g in zip(fields[c.field], fields[c.requires], strict=True)
                ]
        if FILLED:
            fields["filled"] = [
                dict(zip(_FILLED_NAMES, row, strict=True))
                for row in zip(*(fields.pop(name) for name in _FILLED_NAMES), strict=True)
            ]
        keys = list(fields)
        for trace_id, row in zip(self.ids, zip(*fields.values(), strict=True), strict=True):
            yield TraceBreakdown(trace_id=str(trace_id), **dict(zip(keys, row, strict=True)))


_NAMES = frozenset(c.name for c in ROW)
_FILLED_NAMES = tuple(c.name for c in FILLED)


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


_DTYPES = {"q": np.int64, "i": np.int32, "d": np.float64, "b": np.int8, "B": np.uint8}


def empty(c: Column) -> array | bytearray:
    """An empty store for column ``c``."""
    return bytearray() if c.code == "B" else array(c.code)


def view(c: Column, column: array | bytearray) -> np.ndarray:
    """The values of column ``c``'s store as numpy (no copy)."""
    dtype = _DTYPES[c.code]
    return np.frombuffer(column, dtype) if len(column) else np.zeros(0, dtype)


def _np(col: array) -> np.ndarray:
    return np.frombuffer(col, np.int64) if len(col) else np.zeros(0, np.int64)


def _move(table: object, other: object, c: Column) -> None:
    """Append ``other``'s column ``c`` to ``table``'s and free it there, so that a
    merge holds one column twice at most."""
    getattr(table, c.attr).extend(getattr(other, c.attr))
    setattr(other, c.attr, empty(c))


def _usual(table: Any, c: Column) -> Any:
    """The value every row of ``table`` has in the lazy column ``c`` while its store is
    empty: the first row's (the schema's usual value for a column of strings, whose
    indexes differ from table to table)."""
    return table._runs.get(c.name, c.lazy_value)


def _fill(table: Any, c: Column, rows: int) -> array | bytearray:
    """``table``'s store of the lazy column ``c``, filled with the value its rows had
    up to ``rows`` if empty."""
    column = getattr(table, c.attr)
    if not len(column) and rows:
        usual = _usual(table, c)
        if type(column) is bytearray:
            column.extend(bytes([int(usual or 0)]) * rows)
        else:
            column.extend(array(c.code, [usual]) * rows)
    return column


def _put(table: Any, row: int, c: Column, values: list) -> None:
    """Append ``values`` (rows ``row`` on) to the lazy column ``c``: nothing while it
    is empty and they all have the value the rows before them have (which saves about
    30 bytes a trace for the columns most rows leave at one value)."""
    column = getattr(table, c.attr)
    if not len(column) and not row and values and c.name in table._runs:
        table._runs[c.name] = values[0]  # the first rows: theirs is the value to keep
    if len(column) or values.count(_usual(table, c)) != len(values):
        _fill(table, c, row).extend(values)


def _move_lazy(table: Any, other: Any, c: Column, base: int, rows: int) -> None:
    """:func:`_move` for a lazy column (``base`` and ``rows``: the two tables' row
    counts): still empty when both are and their rows have the same value."""
    if not len(getattr(table, c.attr)) and not len(getattr(other, c.attr)):
        if not rows:
            return
        if not base:  # (this table has no rows: it takes the other's value)
            if c.name in table._runs:
                table._runs[c.name] = other._runs[c.name]
            return
        if _usual(table, c) == _usual(other, c):
            return
    _fill(table, c, base)
    _fill(other, c, rows)
    _move(table, other, c)
