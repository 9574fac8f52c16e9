"""Per-trace results, kept compactly: what the aggregates need, in flat arrays.

A :class:`TraceTable` holds one row per attributed trace: its id, start, end-to-end
time and span count in typed arrays, and its group, TTFT-group and hop times as
sparse rows (``CSR``: an end offset per row into flat index and value arrays), about
200 bytes a trace for the seven stages instead of a few kilobytes of objects. Tables
of separate ranges, files or worker processes are joined with :meth:`merge`.

A trace whose spans were cut into two parts (a range boundary, or a part that
straggled in past the streaming window) gets a row for each part; :meth:`repeated`
finds them and :meth:`drop` takes them out before the joined trace is added. Traces a
filter dropped or that had no root leave a row-less mark, so that they are found too.
Each row keeps ``seq`` (the place of the trace's first span in the input) and
``last_end`` (the end of its last line) so the parts can be read again.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from tracer.analysis.breakdown import TraceBreakdown
from tracer.spans.model import Warnings

__all__ = ["Columns", "TraceTable"]

_NONE = -1  # None in an int column (times to first token and token counts are >= 0)


class _Names:
    """Strings (or pairs) as small ints, in order of first use."""

    __slots__ = ("index", "names")

    def __init__(self) -> None:
        self.names: list = []
        self.index: dict = {}

    def of(self, name: object) -> int:
        i = self.index.get(name)
        if i is None:
            i = self.index[name] = len(self.names)
            self.names.append(name)
        return i


class _Sparse:
    """Rows of ``{name: int}``: an end offset per row into flat (name, value) arrays."""

    __slots__ = ("ends", "keys", "names", "values")

    def __init__(self, names: _Names) -> None:
        self.names = names
        self.ends = array("q")
        self.keys = array("i")
        self.values = array("q")

    def add(self, row: dict | None) -> None:
        if row:
            keys: list = list(map(self.names.index.get, row))  # known names: no call each
            if None in keys:
                of = self.names.of
                keys = [of(k) for k in row]
            self.keys.extend(keys)
            self.values.extend(row.values())
        self.ends.append(len(self.values))

    def extend(self, other: _Sparse, remap: np.ndarray) -> None:
        base = len(self.values)
        self.ends.extend((np.frombuffer(other.ends, np.int64) + base).tolist())
        keys = np.frombuffer(other.keys, np.int32)
        self.keys.extend(remap[keys].tolist() if keys.size else [])
        self.values.extend(other.values)

    def flat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row of each entry, name index of each entry, value of each entry)."""
        ends = np.frombuffer(self.ends, np.int64) if len(self.ends) else np.zeros(0, np.int64)
        counts = np.diff(ends, prepend=0)
        rows = np.repeat(np.arange(ends.size), counts)
        keys = np.frombuffer(self.keys, np.int32) if len(self.keys) else np.zeros(0, np.int32)
        values = np.frombuffer(self.values, np.int64) if len(self.values) else np.zeros(0, np.int64)
        return rows, keys, values


@dataclass(frozen=True)
class Columns:
    """A table's rows as numpy arrays, sorted by start time and trace id, dropped rows
    left out: what :func:`~tracer.analysis.aggregate.aggregate` consumes."""

    ids: np.ndarray
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
    groups: tuple[np.ndarray, np.ndarray, np.ndarray]
    group_names: list[str]
    ttft_groups: tuple[np.ndarray, np.ndarray, np.ndarray]
    hops: tuple[np.ndarray, np.ndarray, np.ndarray]
    hop_names: list[tuple[str, str]]

    def __len__(self) -> int:
        return int(self.e2e_ns.size)

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
        for r in range(len(self)):
            ttft = int(self.ttft_ns[r])
            yield TraceBreakdown(
                trace_id=self.ids[r],
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
            )


def _rows(flat: tuple[np.ndarray, np.ndarray, np.ndarray], names: list, n: int) -> list[dict]:
    out: list[dict] = [{} for _ in range(n)]
    for r, k, v in zip(*(a.tolist() for a in flat), strict=True):
        out[r][names[k]] = v
    return out


class TraceTable:
    """Per-trace breakdowns in flat arrays; see the module docstring."""

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._start = array("q")
        self._e2e = array("q")
        self._spans = array("q")
        self._ttft = array("q")
        self._model_ttft = array("q")
        self._tin = array("q")
        self._tout = array("q")
        self._model = array("i")
        self._root = array("i")  # root service, root name: indexes into _strings
        self._seq = array("q")
        self._last_end = array("q")
        self._strings = _Names()
        self._group_names = _Names()
        self._hop_names = _Names()
        self._groups = _Sparse(self._group_names)
        self._ttft_groups = _Sparse(self._group_names)
        self._hops = _Sparse(self._hop_names)
        # Per-trace warnings (rare: most traces have none), and the marks of traces that
        # left no row: row or mark number -> warnings.
        self._warnings: dict[int, Warnings] = {}
        self._marks: list[tuple[str, int, int, Warnings | None]] = []
        self._dropped: set[int] = set()

    def __len__(self) -> int:
        return len(self._e2e)

    def add(
        self, b: TraceBreakdown, seq: int = 0, last_end: int = 0, issues: Warnings | None = None
    ) -> None:
        """Add a trace's breakdown; ``issues`` are the warnings preparing it raised."""
        if issues is not None and issues.any:
            self._warnings[len(self._e2e)] = issues
        self._ids.append(b.trace_id)
        self._start.append(b.start_ns)
        self._e2e.append(b.e2e_ns)
        self._spans.append(b.span_count)
        self._ttft.append(_NONE if b.ttft_ns is None or b.ttft_groups is None else b.ttft_ns)
        self._model_ttft.append(_NONE if b.model_ttft_ns is None else b.model_ttft_ns)
        self._tin.append(_NONE if b.input_tokens is None else b.input_tokens)
        self._tout.append(_NONE if b.output_tokens is None else b.output_tokens)
        self._model.append(self._strings.of(b.model))
        self._root.append(self._strings.of(b.root_service))
        self._root.append(self._strings.of(b.root_name))
        self._seq.append(seq)
        self._last_end.append(last_end)
        self._groups.add(b.groups)
        self._ttft_groups.add(b.ttft_groups)
        self._hops.add(b.hops)

    def mark(self, trace_id: str, seq: int, last_end: int, issues: Warnings | None) -> None:
        """Remember a trace that left no row (filtered out, or no root)."""
        self._marks.append((trace_id, seq, last_end, issues if issues and issues.any else None))

    def merge(self, other: TraceTable) -> None:
        """Append the rows and marks of ``other``."""
        base = len(self)
        for r, w in other._warnings.items():
            self._warnings[base + r] = w
        self._dropped.update(base + r for r in other._dropped)
        self._ids.extend(other._ids)
        for name in ("_start", "_e2e", "_spans", "_ttft", "_model_ttft", "_tin", "_tout"):
            getattr(self, name).extend(getattr(other, name))
        self._seq.extend(other._seq)
        self._last_end.extend(other._last_end)
        strings = np.array([self._strings.of(s) for s in other._strings.names] or [0], np.int32)
        for name in ("_model", "_root"):
            col = np.frombuffer(getattr(other, name), np.int32)
            getattr(self, name).extend(strings[col].tolist() if col.size else [])
        groups = np.array(
            [self._group_names.of(g) for g in other._group_names.names] or [0], np.int32
        )
        hops = np.array([self._hop_names.of(h) for h in other._hop_names.names] or [0], np.int32)
        self._groups.extend(other._groups, groups)
        self._ttft_groups.extend(other._ttft_groups, groups)
        self._hops.extend(other._hops, hops)
        self._marks.extend(other._marks)

    def repeated(self) -> dict[str, list[tuple[int, int]]]:
        """Trace ids with more than one row or mark: id -> [(seq, last_end), ...]."""
        counts: dict[str, int] = {}
        for i, t in enumerate(self._ids):
            if i not in self._dropped:
                counts[t] = counts.get(t, 0) + 1
        for t, *_ in self._marks:
            counts[t] = counts.get(t, 0) + 1
        twice = {t for t, n in counts.items() if n > 1}
        if not twice:
            return {}
        out: dict[str, list[tuple[int, int]]] = {t: [] for t in twice}
        for i, t in enumerate(self._ids):
            if t in twice and i not in self._dropped:
                out[t].append((self._seq[i], self._last_end[i]))
        for t, seq, end, _ in self._marks:
            if t in twice:
                out[t].append((seq, end))
        return out

    def drop(self, trace_ids: set[str]) -> None:
        """Take out every row and mark of ``trace_ids`` (their parts, before the join)."""
        self._dropped.update(i for i, t in enumerate(self._ids) if t in trace_ids)
        self._marks = [m for m in self._marks if m[0] not in trace_ids]

    def tally(self) -> Warnings:
        """The warnings of the kept rows and marks, in input order (as a serial run)."""
        found = [(self._seq[r], w) for r, w in self._warnings.items() if r not in self._dropped] + [
            (seq, w) for _, seq, _, w in self._marks if w is not None
        ]
        found.sort(key=lambda x: x[0])
        out = Warnings()
        for _, w in found:
            out.merge(w)
        return out

    def columns(self) -> Columns:
        """The kept rows as arrays, sorted by (start, trace id); see :class:`Columns`."""
        n = len(self)
        start = _np(self._start)
        ids = np.array([t.encode() for t in self._ids], dtype=bytes) if n else np.zeros(0, "S1")
        keep = np.ones(n, bool)
        if self._dropped:
            keep[list(self._dropped)] = False
        order = np.lexsort((ids, start))
        order = order[keep[order]]
        # Position of each kept row in the sorted order, for the sparse columns.
        position = np.full(n, -1, np.int64)
        position[order] = np.arange(order.size)

        def sparse(s: _Sparse) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            rows, keys, values = s.flat()
            rows = position[rows]
            mine = rows >= 0
            rows, keys, values = rows[mine], keys[mine], values[mine]
            by = np.argsort(rows, kind="stable")
            return rows[by], keys[by], values[by]

        return Columns(
            ids=np.array([self._ids[i] for i in order.tolist()], dtype=object),
            start_ns=start[order],
            e2e_ns=_np(self._e2e)[order],
            span_count=_np(self._spans)[order],
            ttft_ns=_np(self._ttft)[order],
            model_ttft_ns=_np(self._model_ttft)[order],
            input_tokens=_np(self._tin)[order],
            output_tokens=_np(self._tout)[order],
            model=_np32(self._model)[order],
            root_service=_np32(self._root)[0::2][order],
            root_name=_np32(self._root)[1::2][order],
            strings=list(self._strings.names),
            groups=sparse(self._groups),
            group_names=list(self._group_names.names),
            ttft_groups=sparse(self._ttft_groups),
            hops=sparse(self._hops),
            hop_names=list(self._hop_names.names),
        )


def _opt(value: int) -> int | None:
    return None if value == _NONE else value


def _np(col: array) -> np.ndarray:
    return np.frombuffer(col, np.int64) if len(col) else np.zeros(0, np.int64)


def _np32(col: array) -> np.ndarray:
    return np.frombuffer(col, np.int32) if len(col) else np.zeros(0, np.int32)
