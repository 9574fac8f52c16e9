"""A trace table's sparse rows: ``{name: number}`` for each trace (its time in each
group, its time in each group before the first token, its time on each network hop).

Traces of a kind repeat a few sets of names (the stages a trace of that shape
passes), so a row keeps the index of its *key set* among the distinct ones seen (two
bytes) and its values (eight bytes each). For the seven-stage chain the three sparse
columns then cost 6 bytes a row besides their values, against 49 for an end offset a
row and a name index an entry. A column that meets more than 65,535 distinct sets
(names made per trace, say) turns for good to that explicit form: an end offset a
row (four bytes until there are more than 2**31 - 1 entries) and a name index an
entry (two bytes until there are more than 65,536 names). Either form reads back as
the same :class:`~tracer.analysis.table._columns.Entries`
(:func:`~tracer.analysis.table._reorder.sorted_entries`).
"""

from __future__ import annotations

from array import array

import numpy as np

__all__: list[str] = []

_MAX_END = 2**31 - 1  # the last entry four-byte row ends reach
_MAX_SETS = 0xFFFF  # distinct key sets a column keeps as two-byte indices


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


def _ends(col: array) -> np.ndarray:
    """An explicit column's row ends (four or eight bytes each) as int64."""
    return np.frombuffer(col, col.typecode).astype(np.int64) if len(col) else np.zeros(0, np.int64)


class _Sparse:
    """Rows of ``{name: number}`` (int values, or float ones with ``code="d"``), each a
    key set and its values, or in the explicit form; see the module docstring."""

    __slots__ = ("ends", "keys", "names", "rows", "sets", "values")

    def __init__(self, names: _Names, code: str = "q") -> None:
        self.names = names
        #: the distinct key sets (tuples of name indices); None: the explicit form
        self.sets: _Names | None = _Names()
        self.rows = array("H")  # each row's key set
        self.ends = array("i")  # the explicit form: each row's end in keys and values
        self.keys = array("H")  # the explicit form: each entry's name
        self.values = array(code)

    def _fit(self, more: int = 0) -> None:
        """In the explicit form, widen the name indices once there are too many names
        for two bytes, and the row ends once ``more`` entries would not fit in four."""
        if self.keys.typecode == "H" and len(self.names.names) > 0xFFFF:
            self.keys = array("i", self.keys)
        if self.ends.typecode == "i" and len(self.values) + more > _MAX_END:
            self.ends = array("q", self.ends)

    def _set(self, keys: tuple) -> int | None:
        """The index of the key set ``keys``; None once the column is explicit."""
        sets = self.sets
        if sets is None:
            return None
        i = sets.index.get(keys)
        if i is None:
            if len(sets.names) >= _MAX_SETS:
                self._explicit()
                return None
            i = sets.of(keys)
        return i

    def _explicit(self) -> None:
        """Turn to the explicit form, the rows so far written out."""
        if self.sets is None:
            return
        ends, keys = self.spelled(np.frombuffer(self.rows, np.uint16))
        self.sets, self.rows = None, array("H")
        self.ends = array("q" if ends.size and ends[-1] > _MAX_END else "i")
        self.ends.frombytes(ends.astype(self.ends.typecode).tobytes())
        self.keys = array(keys.dtype.char)
        self.keys.frombytes(keys.tobytes())

    def row_ends(self) -> np.ndarray:
        """Each row's end in the values, as int64."""
        if self.sets is None:
            return _ends(self.ends)
        return np.cumsum(self._lengths()[np.frombuffer(self.rows, np.uint16)])

    def _lengths(self) -> np.ndarray:
        sets = self.sets.names if self.sets is not None else []
        return np.array([len(s) for s in sets] or [0], np.int64)

    def table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(length, first entry, names) of the key sets, laid out flat: what
        :meth:`spelled` reads, made once for all the chunks of a sort."""
        known = self.sets.names if self.sets is not None else []
        length = self._lengths()
        code = "H" if len(self.names.names) <= 0x10000 else "i"
        flat = np.array([k for s in known for k in s] or [0], code)
        return length, np.cumsum(length) - length, flat

    def spelled(
        self, sets: np.ndarray, table: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(each row's end as int64, each entry's name index) of rows with the key sets
        ``sets`` (``table``: :meth:`table`, if already made)."""
        length, offset, flat = self.table() if table is None else table
        lengths = length[sets]
        ends = np.cumsum(lengths)
        total = int(ends[-1]) if ends.size else 0
        at = np.repeat(offset[sets] - (ends - lengths), lengths) + np.arange(total)
        return ends, flat[at]

    def add(self, row: dict | None) -> None:
        keys: list = []
        if row:
            keys = list(map(self.names.index.get, row))  # known names: no call each
            if None in keys:
                of = self.names.of
                keys = [of(k) for k in row]
        i = self._set(tuple(keys))
        if i is not None:
            self.rows.append(i)
        else:
            self._fit(len(keys))
            self.keys.extend(keys)
            self.ends.append(len(self.values) + len(keys))
        if row:
            self.values.extend(row.values())

    def add_many(self, names: list, sums: np.ndarray, rows: np.ndarray | None) -> None:
        """Rows of (rows, names) ``sums``: each name whose sum is positive, in the
        order of ``names``; a row where ``rows`` is False is empty."""
        keep = sums > 0
        if rows is not None:
            keep &= rows[:, None]
        at, col = np.nonzero(keep)
        ids = np.zeros(max(1, len(names)), np.int32)
        for c in np.nonzero(keep.any(axis=0))[0].tolist():  # names no row has stay unknown
            ids[c] = self.names.of(names[c])
        if self.sets is not None:
            patterns, inverse = _patterns(keep)
            found = [self._set(tuple(ids[np.nonzero(p)[0]].tolist())) for p in patterns]
            if self.sets is not None and None not in found:
                mine = np.array(found or [0], np.uint16)[inverse]
                self.rows.frombytes(mine.tobytes())
                self._values(sums[at, col])
                return
            self._explicit()  # (a new set past the limit)
        self._fit(at.size)
        self.keys.frombytes(ids[col].astype(self.keys.typecode).tobytes())
        counts = keep.sum(axis=1)
        ends = np.cumsum(counts) + len(self.values)
        self.ends.frombytes(ends.astype(self.ends.typecode).tobytes())
        self._values(sums[at, col])

    def _values(self, values: np.ndarray) -> None:
        dtype = np.float64 if self.values.typecode == "d" else np.int64
        self.values.frombytes(values.astype(dtype).tobytes())

    def extend(self, other: _Sparse, remap: np.ndarray) -> None:
        """Append ``other``'s rows, its name indices mapped through ``remap``."""
        if self.sets is not None and other.sets is not None:
            found = [self._set(tuple(remap[list(s)].tolist())) for s in other.sets.names]
            if self.sets is not None and None not in found:
                if len(other.rows):
                    rows = np.array(found, np.uint16)[np.frombuffer(other.rows, np.uint16)]
                    self.rows.frombytes(rows.tobytes())
                self.values.extend(other.values)
                other.__init__(other.names, other.values.typecode)  # type: ignore[misc]
                return
        self._explicit()
        other._explicit()
        base = len(self.values)
        self._fit(len(other.values))
        if len(other.ends):
            ends = _ends(other.ends) + base
            self.ends.frombytes(ends.astype(self.ends.typecode).tobytes())
        if len(other.keys):
            keys = np.frombuffer(other.keys, other.keys.typecode)
            self.keys.frombytes(remap[keys].astype(self.keys.typecode).tobytes())
        self.values.extend(other.values)
        # ``other`` is merged in and dropped: its arrays are freed now, not after the merge.
        other.__init__(other.names, other.values.typecode)  # type: ignore[misc]


def _patterns(keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of the boolean matrix ``keep`` and each row's index among
    them (``np.unique(keep, axis=0)``, which takes a millisecond for a batch: here
    the rows of a batch, which are nearly always alike, are compared with the first,
    and else numbered by their bits)."""
    n, k = keep.shape
    if not n or (keep == keep[0]).all():
        return keep[:1], np.zeros(n, np.intp)
    if k <= 64:
        bits = keep.astype(np.uint64) @ (np.uint64(1) << np.arange(k, dtype=np.uint64))
        _, first, inverse = np.unique(bits, return_index=True, return_inverse=True)
        return keep[first], inverse.reshape(-1)
    patterns, inverse = np.unique(keep, axis=0, return_inverse=True)
    return patterns, inverse.reshape(-1)
