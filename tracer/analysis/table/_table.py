"""Per-trace results, kept compactly: what the aggregates need, in flat arrays.

A :class:`TraceTable` holds one row per attributed trace, a store per column that
:mod:`tracer.analysis.table.schema` declares: its id, start, end-to-end time and span count
in typed arrays, and its group, TTFT-group and hop times as sparse rows
(:mod:`tracer.analysis.table._sparse`: the index of the row's set of names, and its values),
about 250 bytes a trace for the seven stages instead of a few kilobytes of objects.
The columns most rows leave at one value (the schema's ``lazy`` ones) stay empty
while every row has the first row's value. Tables of separate ranges, files or worker
processes are joined with :meth:`merge`.

A trace whose spans were cut into two parts (a range boundary, or a part that
straggled in past the streaming window) gets a row for each part; :meth:`repeated`
finds them and :meth:`drop` takes them out before the joined trace is added. Traces a
filter dropped or that had no root leave a row-less mark, so that they are found too.
Each row keeps ``seq`` (the place of the trace's first span in the input) and
``last_end`` (the end of its last line) so the parts can be read again.

Each row also keeps the trace's weight, what a sampled trace stands for (1 for full
data; :mod:`tracer.analysis.sampling.weights`, read from its root span), and whether that
weight is known. Two optional columns travel the same way: the trace's value of a
``--split-by`` attribute, and a what-if projection (:class:`Projected`: the retimed end-to-end time,
TTFT before and after, whether the trace has the stage, and its stage times before and
after), computed at attribution time since the speedup is known before reading.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from tracer.analysis.model.breakdown import TraceBreakdown
from tracer.analysis.table._columns import (
    _NONE,
    Columns,
    Projected,
    ProjectedColumns,
    _fill,
    _move,
    _move_lazy,
    _Names,
    _np,
    _Projections,
    _put,
    _Sparse,
    empty,
    view,
)
from tracer.analysis.table._ids import WIDTH, IdStore, TraceIds, pack
from tracer.analysis.table._reorder import sorted_entries
from tracer.analysis.table.schema import FILLED, PROJECTED, ROW, Column
from tracer.spans.model import Warnings

__all__ = ["Columns", "Projected", "ProjectedColumns", "TraceIds", "TraceTable"]

#: The columns of one value a row, and the sparse ones.
_FLAT = tuple(c for c in ROW if c.layout != "sparse")
_SPARSE = tuple(c for c in ROW if c.layout == "sparse")
_STRINGS = tuple(c for c in _FLAT if c.strings)
#: The lazy columns that stay empty while every row has the first row's value.
_RUNS = tuple(c for c in _FLAT if c.layout == "lazy" and not c.strings)
#: The arguments of :meth:`TraceTable.add` the schema's ``row`` columns are.
_ROW_ARGUMENTS = ("split", "seq", "last_end", "weight", "weight_unknown")


def _compile_add() -> Callable[..., None]:
    """The per-column work of :meth:`TraceTable.add`, written out from the schema once
    (a line per column, as one would write it by hand) so that adding a row does not
    loop over the schema: ``add_values(table, breakdown, row, *row arguments)``."""
    if tuple(c.name for c in _FLAT if c.source == "row") != _ROW_ARGUMENTS:
        raise AssertionError("the schema's row columns are not TraceTable.add's arguments")
    lines = [
        f"def add_values(self, b, row, {', '.join(_ROW_ARGUMENTS)}):",
        "    of = self._strings.of",
    ]
    if FILLED:  # (None for each when the breakdown's were not worked out)
        lines.append("    filled = b.filled or _NOTHING")
    for k, c in enumerate(_FLAT):
        none = f"v is None or b.{c.requires} is None" if c.requires else "v is None"
        if c.strings and c.default is None:  # None is interned like a string
            value = "of(v)"
        else:
            value = f"({c.default!r} if {none} else {'of(v)' if c.strings else 'v'})"
        if c.fill is not None:
            lines.append(f"    v = filled.get({c.name!r})")
        else:
            lines.append(f"    v = {c.name if c.source == 'row' else 'b.' + c.field}")
        if c.layout == "dense":
            lines.append(f"    self.{c.attr}.append({value})")
        elif c.strings:  # nothing stored while every row has the usual value
            lines.append(f"    v = {value}")
            lines.append(f"    if v != {c.lazy_value!r} or len(self.{c.attr}):")
            lines.append(f"        _fill(self, _FLAT[{k}], row).append(v)")
        else:  # nothing stored while every row has the first row's value
            lines.append(f"    v = {value}")
            lines.append(f"    if len(self.{c.attr}):")
            lines.append(f"        self.{c.attr}.append(v)")
            lines.append(f"    elif v != self._runs[{c.name!r}]:")
            lines.append("        if row:")
            lines.append(f"            _fill(self, _FLAT[{k}], row).append(v)")
            lines.append("        else:")
            lines.append(f"            self._runs[{c.name!r}] = v")
    lines += [f"    self.{c.attr}.add(b.{c.field})" for c in _SPARSE]
    namespace: dict[str, Any] = {"_FLAT": _FLAT, "_fill": _fill, "_NOTHING": {}}
    exec("\n".join(lines), namespace)  # noqa: S102 (the schema's own text)
    return namespace["add_values"]  # type: ignore[no-any-return]


_add_values = _compile_add()


class TraceTable:
    """Per-trace breakdowns in flat arrays, a store per column of
    :data:`~tracer.analysis.table.schema.ROW` (the attribute ``_`` + its name); see the
    module docstring."""

    # (the columns the table's own methods read by name)
    _start_ns: array
    _seq: array
    _last_end: array
    _split: array

    def __init__(self) -> None:
        self._ids = IdStore()
        self._strings = _Names()
        self._group_names = _Names()
        self._hop_names = _Names()
        for c in _FLAT:  # lazy ones stay empty while every row has one value
            setattr(self, c.attr, empty(c))
        # The value of each lazy column (but of strings) while its store is empty.
        self._runs: dict[str, Any] = {c.name: c.lazy_value for c in _RUNS}
        for c in _SPARSE:
            setattr(self, c.attr, _Sparse(self._names(c)))
        self._projected: _Projections | None = None
        # Per-trace warnings (rare: most traces have none), and the marks of traces that
        # left no row: row or mark number -> warnings.
        self._warnings: dict[int, Warnings] = {}
        self._marks: list[_Mark] = []
        self._dropped: set[int] = set()

    def _names(self, c: Column) -> _Names:
        """The interned names the keys of the sparse column ``c`` index."""
        return self._group_names if c.keys == "group" else self._hop_names

    def __len__(self) -> int:
        return len(self._seq)  # (a column every row has, kept by columns(release=True))

    def add(
        self,
        b: TraceBreakdown,
        seq: int = 0,
        last_end: int = 0,
        issues: Warnings | None = None,
        split: str | None = None,
        projected: Projected | None = None,
        weight: tuple[float, bool] = (1.0, True),
    ) -> None:
        """Add a trace's breakdown; ``issues`` are the warnings preparing it raised,
        ``split`` its ``--split-by`` value, ``projected`` its what-if projection (give
        one for every row or for none), ``weight`` what it stands for and whether that
        is known."""
        row = len(self._seq)
        if issues is not None and issues.any:
            self._warnings[row] = issues
        self._ids.append(b.trace_id)
        _add_values(self, b, row, split, seq, last_end, weight[0], not weight[1])
        if projected is not None:
            if self._projected is None:
                self._projected = _Projections(self._group_names)
            self._projected.add(projected)

    def add_rows(
        self,
        ids: list[str],
        columns: Mapping[str, Any],
        projected: list[Projected] | None = None,
    ) -> None:
        """Add a batch of rows at once, as :meth:`add` would one by one (traces of one
        shape, :mod:`tracer.analysis.attribution.batches`). ``columns`` holds each
        column of :data:`~tracer.analysis.table.schema.ROW` by name: a numpy array (None
        already its default), a list of values (None for None), or one value for
        every row; a column left out is its default in every row. A sparse column is
        (names, (rows, names) sums, the rows that have entries or None), a name kept
        for a row when its sum is positive (as the walks keep only spans with time).
        ``projected`` is each row's what-if projection (for every row of the table or
        for none)."""
        if (projected is None) != (self._projected is None) and len(self._seq):
            raise ValueError("give a what-if projection for every row or for none")
        n, row = len(ids), len(self._seq)
        self._ids.extend(ids)
        of = self._strings.of
        for c in _FLAT:
            value = columns.get(c.name)
            column = getattr(self, c.attr)
            if isinstance(value, np.ndarray):
                if c.layout == "dense":
                    column.frombytes(value.astype(view(c, column).dtype).tobytes())
                    continue
                value = value.tolist()
            elif value is None:  # left out: None (its default) in every row
                value = [None] * n
            elif not isinstance(value, list):
                value = [value] * n
            if c.strings:
                known = {  # interned in order of first use
                    v: c.default if v is None and c.default is not None else of(v)
                    for v in dict.fromkeys(value)
                }
                value = list(map(known.__getitem__, value))
            elif None in value:
                value = [c.default if v is None else v for v in value]
            if c.layout == "dense":
                column.extend(value)
            else:
                _put(self, row, c, value)
        for c in _SPARSE:
            names, sums, rows = columns.get(c.name) or ([], np.zeros((n, 0), np.int64), None)
            getattr(self, c.attr).add_many(names, sums, rows)
        if projected is not None:
            if self._projected is None:
                self._projected = _Projections(self._group_names)
            for p in projected:
                self._projected.add(p)

    def mark(
        self,
        trace_id: str,
        seq: int,
        last_end: int,
        issues: Warnings | None,
        split: str | None = None,
        selected: bool = True,
    ) -> None:
        """Remember a trace that left no row: no root (``issues`` says so), or not
        ``selected`` by the filter."""
        kept = issues if issues and issues.any else None
        self._marks.append(_Mark(trace_id, seq, last_end, kept, split, selected))

    def merge(self, other: TraceTable) -> None:
        """Append the rows and marks of ``other``, which is left empty (an empty table
        takes its storage as it is: merging one partition copies nothing)."""
        if not len(self) and not self._marks and self._projected is None:
            self.__dict__.update(other.__dict__)
            other.__init__()  # type: ignore[misc]
            return
        base, rows = len(self), len(other)
        for r, w in other._warnings.items():
            self._warnings[base + r] = w
        self._dropped.update(base + r for r in other._dropped)
        self._ids.merge(other._ids)
        for c in _FLAT:
            if c.strings:
                continue
            if c.layout == "lazy":
                _move_lazy(self, other, c, base, rows)
            else:
                _move(self, other, c)
        strings = np.array(
            [self._strings.of(s) for s in other._strings.names] + [_NONE], np.int32
        )  # the last one maps -1 (no value) to itself
        for c in _STRINGS:
            if c.layout == "lazy" and (len(getattr(other, c.attr)) or len(getattr(self, c.attr))):
                _fill(self, c, base)
                _fill(other, c, rows)
            theirs = getattr(other, c.attr)
            if len(theirs):
                getattr(self, c.attr).frombytes(strings[view(c, theirs)].astype(np.int32).tobytes())
        remap = {
            "group": np.array(
                [self._group_names.of(g) for g in other._group_names.names] or [0], np.int32
            ),
            "hop": np.array(
                [self._hop_names.of(h) for h in other._hop_names.names] or [0], np.int32
            ),
        }
        for c in _SPARSE:
            getattr(self, c.attr).extend(getattr(other, c.attr), remap[c.keys])
        if other._projected is not None:
            if self._projected is None:
                self._projected = _Projections(self._group_names)
            self._projected.extend(other._projected, remap["group"])
        self._marks.extend(other._marks)
        other.__init__()  # type: ignore[misc]

    def repeated(self) -> dict[str, list[tuple[int, int]]]:
        """Trace ids with more than one row or mark: id -> [(seq, last_end), ...]."""
        twice = self._twice()
        if not twice:
            return {}
        out: dict[str, list[tuple[int, int]]] = {t: [] for t in twice}
        for i in self._rows_of(twice):
            out[self._ids[i]].append((self._seq[i], self._last_end[i]))
        for m in self._marks:
            if m.trace_id in twice:
                out[m.trace_id].append((m.seq, m.last_end))
        return out

    def _twice(self) -> set[str]:
        """The ids of more than one kept row or mark."""
        dropped = self._dropped
        marks = [pack(m.trace_id) for m in self._marks]
        if not self._ids.odd and None not in marks:  # 16 bytes each: sorted in C
            packed = self._ids.view()
            if dropped:
                packed = np.delete(packed, list(dropped))
            if marks:
                packed = np.concatenate([packed, np.array(marks, f"S{WIDTH}")])
            packed = np.sort(packed)
            same = packed[1:][packed[1:] == packed[:-1]]
            return set(TraceIds(np.unique(same)))
        ids = self._ids
        names = [t for i, t in enumerate(ids) if i not in dropped]
        names += [m.trace_id for m in self._marks]
        if len(set(names)) == len(names):
            return set()
        return {t for t, n in Counter(names).items() if n > 1}

    def _rows_of(self, trace_ids: set[str]) -> list[int]:
        """The kept rows whose id is one of ``trace_ids``, in order."""
        odd = self._ids.odd
        rows = {r for r, t in odd.items() if t in trace_ids}
        packed = [p for p in map(pack, trace_ids) if p is not None]
        if packed:
            hits = np.isin(self._ids.view(), np.array(packed, f"S{WIDTH}"))
            if odd:  # (their bytes are zeros, which an id of zeros would match)
                hits[list(odd)] = False
            rows.update(np.nonzero(hits)[0].tolist())
        return sorted(rows - self._dropped)

    def drop(self, trace_ids: set[str]) -> None:
        """Take out every row and mark of ``trace_ids`` (their parts, before the join)."""
        self._dropped.update(self._rows_of(trace_ids))
        self._marks = [m for m in self._marks if m.trace_id not in trace_ids]

    def tally(self, split: str | None = None) -> Warnings:
        """The warnings of the kept rows and marks, in input order (as a serial run);
        with ``split``, of the traces with that ``--split-by`` value only."""
        strings = self._strings.names
        found = [
            (self._seq[r], w)
            for r, w in self._warnings.items()
            if r not in self._dropped
            and (split is None or (len(self._split) and strings[self._split[r]] == split))
        ]
        found += [
            (m.seq, m.issues)
            for m in self._marks
            if m.issues is not None and (split is None or m.split == split)
        ]
        found.sort(key=lambda x: x[0])
        out = Warnings()
        for _, w in found:
            out.merge(w)
        return out

    def unrooted(self) -> dict[str | None, int]:
        """Selected traces that left no row (no root), by ``--split-by`` value."""
        out: dict[str | None, int] = {}
        for m in self._marks:
            if m.selected:
                out[m.split] = out.get(m.split, 0) + 1
        return out

    def columns(self, release: bool = False) -> Columns:
        """The kept rows as arrays, sorted by (start, trace id); see :class:`Columns`.

        With ``release``, the table gives up each column as soon as it is copied, so
        the rows are held about once, not twice; what stays (``seq``, the split values,
        marks and warnings) is what ``len``, :meth:`tally` and :meth:`unrooted` read."""
        n = len(self)
        start = _np(self._start_ns)
        keep = np.ones(n, bool)
        if self._dropped:
            keep[list(self._dropped)] = False
        order = np.argsort(start, kind="stable")
        if n > 1 and (start[order[1:]] == start[order[:-1]]).any():  # ties: by trace id
            tie = (
                self._ids.view()
                if not self._ids.odd
                else np.array([t.encode() for t in self._ids], dtype=bytes)
            )
            order = np.lexsort((tie, start))
            del tie
        order = order[keep[order]]
        del start, keep

        ids = self._ids.column(order)
        if release:
            self._ids = IdStore()
        found: dict[str, Any] = {}
        for c in ROW:
            if c.layout == "sparse":
                found[c.name] = sorted_entries(self, c.attr, order, release)
                continue
            column = getattr(self, c.attr)
            usual = c.lazy_value
            if c.layout == "lazy" and not len(column):  # every row has one value
                value = self._runs.get(c.name, usual)
                if c.absent == "full" or (c.absent == "any" and value != usual):
                    full = np.full(order.size, value, view(c, column).dtype)
                    found[c.name] = full.astype(c.dtype) if c.dtype else full
                else:
                    found[c.name] = None
                continue
            values = _sorted(c, column, order)
            if release and not c.kept:
                setattr(self, c.attr, empty(c))
            if c.absent == "any" and not (values != usual).any():
                found[c.name] = None
            elif c.absent == "all" and not (values.size and (values != usual).all()):
                found[c.name] = None
            else:
                found[c.name] = values
        p = self._projected
        projected = None
        if p is not None and len(p) == n:
            sorted_p: dict[str, Any] = {
                c.name: sorted_entries(p, c.name, order, release).flat()
                if c.layout == "sparse"
                else _sorted(c, getattr(p, c.name), order)
                for c in PROJECTED
            }
            projected = ProjectedColumns(**sorted_p)
        if release:
            self._projected = None
        return Columns(
            ids=ids,
            strings=list(self._strings.names),
            group_names=list(self._group_names.names),
            hop_names=list(self._hop_names.names),
            projected=projected,
            **found,
        )


def _sorted(c: Column, column: array | bytearray, order: np.ndarray) -> np.ndarray:
    """The rows ``order`` lists of column ``c``'s store, in the dtype of its
    :class:`Columns` field."""
    values = view(c, column)[order]
    return values.astype(c.dtype) if c.dtype else values


class _Mark(NamedTuple):
    trace_id: str
    seq: int
    last_end: int
    issues: Warnings | None
    split: str | None
    selected: bool
