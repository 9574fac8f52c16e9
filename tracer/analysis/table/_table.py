"""Per-trace results, kept compactly: what the aggregates need, in flat arrays.

A :class:`TraceTable` holds one row per attributed trace: its id, start, end-to-end
time and span count in typed arrays, and its group, TTFT-group and hop times as
sparse rows (:mod:`tracer.analysis.table._sparse`: the index of the row's set of names, and
its values), about 250 bytes a trace for the seven stages instead of a few kilobytes
of objects. The columns most rows leave at their default stay empty until a row
differs (:data:`~tracer.analysis.table._columns._DEFAULTS`). Tables
of separate ranges, files or worker processes are joined with :meth:`merge`.

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
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from tracer.analysis.model.breakdown import TraceBreakdown
from tracer.analysis.table._columns import (
    _NONE,
    Columns,
    Flat,
    Projected,
    ProjectedColumns,
    _fill,
    _move,
    _move_lazy,
    _Names,
    _np,
    _np32,
    _npd,
    _Projections,
    _put,
    _Sparse,
)
from tracer.analysis.table._ids import WIDTH, IdStore, TraceIds, pack
from tracer.analysis.table._reorder import sorted_entries
from tracer.spans.model import Warnings

__all__ = ["Columns", "Projected", "ProjectedColumns", "TraceIds", "TraceTable"]


class TraceTable:
    """Per-trace breakdowns in flat arrays; see the module docstring."""

    def __init__(self) -> None:
        self._ids = IdStore()
        self._start = array("q")
        self._e2e = array("q")
        self._spans = array("i")
        self._ttft = array("q")
        self._model_ttft = array("q")
        self._tin = array("q")
        self._tout = array("q")
        # _cached, _coordinator_ttft, _split, _weight, _unknown: empty while every row
        # has the default (_columns._DEFAULTS)
        self._cached = array("q")
        self._coordinator_ttft = array("q")
        self._model = array("i")
        self._root = array("i")  # root service, root name: indexes into _strings
        self._split = array("i")  # the --split-by value: an index into _strings, or -1
        self._seq = array("q")
        self._last_end = array("q")
        self._weight = array("d")
        self._unknown = bytearray()  # 1: the trace's weight cannot be known
        self._strings = _Names()
        self._group_names = _Names()
        self._hop_names = _Names()
        self._groups = _Sparse(self._group_names)
        self._ttft_groups = _Sparse(self._group_names)
        self._hops = _Sparse(self._hop_names)
        self._projected: _Projections | None = None
        # Per-trace warnings (rare: most traces have none), and the marks of traces that
        # left no row: row or mark number -> warnings.
        self._warnings: dict[int, Warnings] = {}
        self._marks: list[_Mark] = []
        self._dropped: set[int] = set()

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
        self._start.append(b.start_ns)
        self._e2e.append(b.e2e_ns)
        self._spans.append(b.span_count)
        self._ttft.append(_NONE if b.ttft_ns is None or b.ttft_groups is None else b.ttft_ns)
        self._model_ttft.append(_NONE if b.model_ttft_ns is None else b.model_ttft_ns)
        self._tin.append(_NONE if b.input_tokens is None else b.input_tokens)
        self._tout.append(_NONE if b.output_tokens is None else b.output_tokens)
        c = b.coordinator_ttft_ns
        _put(self, row, "_cached", [_NONE if b.cached_tokens is None else b.cached_tokens])
        _put(self, row, "_coordinator_ttft", [_NONE if c is None else c])
        self._model.append(self._strings.of(b.model))
        self._root.append(self._strings.of(b.root_service))
        self._root.append(self._strings.of(b.root_name))
        _put(self, row, "_split", [_NONE if split is None else self._strings.of(split)])
        _put(self, row, "_weight", [weight[0]])
        _put(self, row, "_unknown", [not weight[1]])
        self._seq.append(seq)
        self._last_end.append(last_end)
        self._groups.add(b.groups)
        self._ttft_groups.add(b.ttft_groups)
        self._hops.add(b.hops)
        if projected is not None:
            if self._projected is None:
                self._projected = _Projections(self._group_names)
            self._projected.add(projected)

    def add_rows(
        self,
        ids: list[str],
        seqs: list[int],
        last_ends: list[int],
        splits: list[str | None],
        tokens: list[tuple[int | None, int | None, str | None, int | None]],
        *,
        start: np.ndarray,
        e2e: np.ndarray,
        span_count: int,
        ttft: np.ndarray,
        model_ttft: np.ndarray,
        root: tuple[str, str],
        groups: tuple[list[str], np.ndarray],
        ttft_groups: np.ndarray | None,
        hops: tuple[list[tuple[str, str]], np.ndarray],
        projected: list[Projected] | None = None,
        weights: list[tuple[float, bool]] | None = None,
        coordinator_ttft: list[int | None] | None = None,
    ) -> None:
        """Add a batch of rows at once, as :meth:`add` would one by one (traces of one
        shape, :mod:`tracer.analysis.attribution.batches`): int64 columns with -1 for None;
        ``groups`` and ``hops`` are (names, (rows, names) sums), a name kept for a row
        when its sum is positive (as the walks keep only spans with time);
        ``ttft_groups`` the same sums by group where ``ttft`` is set; ``projected``
        each row's what-if projection (for every row of the table or for none);
        ``weights`` each row's (weight, known), as :meth:`add` takes it (None: full
        data, weight 1); ``coordinator_ttft`` each row's P/D coordinator's own time to
        first token (None: no row has one)."""
        if (projected is None) != (self._projected is None) and len(self._e2e):
            raise ValueError("give a what-if projection for every row or for none")
        n, row = len(ids), len(self._seq)
        self._ids.extend(ids)
        for column, values in (
            (self._start, start),
            (self._e2e, e2e),
            (self._ttft, ttft),
            (self._model_ttft, model_ttft),
        ):
            column.frombytes(values.astype(np.int64).tobytes())
        self._spans.extend([span_count] * n)
        of = self._strings.of
        self._tin.extend([_NONE if t[0] is None else t[0] for t in tokens])
        self._tout.extend([_NONE if t[1] is None else t[1] for t in tokens])
        _put(self, row, "_cached", [_NONE if t[3] is None else t[3] for t in tokens])
        if coordinator_ttft is not None:
            coordinator = [_NONE if c is None else c for c in coordinator_ttft]
            _put(self, row, "_coordinator_ttft", coordinator)
        models = [t[2] for t in tokens]
        known = {m: of(m) for m in dict.fromkeys(models)}  # in order of first use
        self._model.extend(map(known.__getitem__, models))
        pair = [of(root[0]), of(root[1])]
        self._root.extend(pair * n)
        known = {v: (_NONE if v is None else of(v)) for v in dict.fromkeys(splits)}
        _put(self, row, "_split", list(map(known.__getitem__, splits)))
        if weights is not None:
            _put(self, row, "_weight", [w for w, _ in weights])
            _put(self, row, "_unknown", [not known for _, known in weights])
        self._seq.extend(seqs)
        self._last_end.extend(last_ends)
        names, sums = groups
        self._groups.add_many(names, sums, None)
        if ttft_groups is None:
            self._ttft_groups.add_many(names, np.zeros_like(sums), None)
        else:
            self._ttft_groups.add_many(names, ttft_groups, ttft >= 0)
        self._hops.add_many(*hops, None)
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
        for name in ("_cached", "_coordinator_ttft", "_weight", "_unknown"):
            _move_lazy(self, other, name, base, rows)
        for r, w in other._warnings.items():
            self._warnings[base + r] = w
        self._dropped.update(base + r for r in other._dropped)
        self._ids.merge(other._ids)
        for name in (
            "_start",
            "_e2e",
            "_spans",
            "_ttft",
            "_model_ttft",
            "_tin",
            "_tout",
            "_seq",
            "_last_end",
        ):
            _move(self, other, name)
        strings = np.array(
            [self._strings.of(s) for s in other._strings.names] + [_NONE], np.int32
        )  # the last one maps -1 (no split value) to itself
        if len(other._split) or len(self._split):
            _fill(self, "_split", base)
            _fill(other, "_split", rows)
        for name in ("_model", "_root", "_split"):
            if len(getattr(other, name)):
                col = np.frombuffer(getattr(other, name), np.int32)
                getattr(self, name).frombytes(strings[col].astype(np.int32).tobytes())
        groups = np.array(
            [self._group_names.of(g) for g in other._group_names.names] or [0], np.int32
        )
        hops = np.array([self._hop_names.of(h) for h in other._hop_names.names] or [0], np.int32)
        self._groups.extend(other._groups, groups)
        self._ttft_groups.extend(other._ttft_groups, groups)
        self._hops.extend(other._hops, hops)
        if other._projected is not None:
            if self._projected is None:
                self._projected = _Projections(self._group_names)
            self._projected.extend(other._projected, groups)
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
        start = _np(self._start)
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

        def take(name: str, view: Callable[[array], np.ndarray] = _np) -> np.ndarray:
            column = getattr(self, name)
            out = view(column)[order]
            if release:
                setattr(self, name, array(column.typecode))
            return out

        def sparse(name: str, owner: object | None = None) -> Flat:
            return sorted_entries(self if owner is None else owner, name, order, release).flat()

        ids = self._ids.column(order)
        if release:
            self._ids = IdStore()
        split = _np32(self._split)[order] if len(self._split) else None
        weight = take("_weight", _npd) if len(self._weight) else None
        unknown = (
            np.frombuffer(bytes(self._unknown), np.uint8)[order].astype(bool)
            if len(self._unknown)
            else None
        )
        if release:
            self._unknown = bytearray()
        root = take("_root", lambda c: _np32(c).reshape(-1, 2))
        p = self._projected
        projected = (
            None
            if p is None or len(p.after) != n
            else ProjectedColumns(
                after_ns=_npd(p.after)[order],
                ttft_before_ns=_np(p.ttft_before)[order],
                ttft_after_ns=_npd(p.ttft_after)[order],
                has_stage=np.frombuffer(p.has_stage, np.int8)[order].astype(bool),
                before_groups=sparse("before_groups", p),
                after_groups=sparse("after_groups", p),
            )
        )
        if release:
            self._projected = None
        return Columns(
            ids=ids,
            start_ns=take("_start"),
            e2e_ns=take("_e2e"),
            span_count=take("_spans", lambda c: _np32(c).astype(np.int64)),
            ttft_ns=take("_ttft"),
            model_ttft_ns=take("_model_ttft"),
            input_tokens=take("_tin"),
            output_tokens=take("_tout"),
            cached_tokens=take("_cached") if len(self._cached) else np.full(order.size, _NONE),
            coordinator_ttft_ns=(
                take("_coordinator_ttft")
                if len(self._coordinator_ttft)
                else np.full(order.size, _NONE)
            ),
            model=take("_model", _np32),
            root_service=root[:, 0].copy(),
            root_name=root[:, 1].copy(),
            strings=list(self._strings.names),
            group_entries=sorted_entries(self, "_groups", order, release),
            group_names=list(self._group_names.names),
            ttft_entries=sorted_entries(self, "_ttft_groups", order, release),
            hop_entries=sorted_entries(self, "_hops", order, release),
            hop_names=list(self._hop_names.names),
            seq=_np(self._seq)[order],
            last_end=take("_last_end"),
            split=split if split is not None and split.size and (split != _NONE).all() else None,
            weight=weight if weight is not None and (weight != 1.0).any() else None,
            weight_unknown=unknown if unknown is not None and unknown.any() else None,
            projected=projected,
        )


class _Mark(NamedTuple):
    trace_id: str
    seq: int
    last_end: int
    issues: Warnings | None
    split: str | None
    selected: bool
