"""A table's sparse rows put in another row order in bounded memory: the step of
:meth:`~tracer.analysis.table._table.TraceTable.columns` that would otherwise hold every
entry twice.

Rows are gathered a chunk at a time. When the table gives its rows up, each source
column is first cut into pieces from its end (an ``array`` shrinks as its tail is
taken), and a piece is let go as soon as no later row reads it; since rows arrive in
nearly their start order, only a few pieces are held besides the sorted copy.
"""

from __future__ import annotations

from array import array

import numpy as np

from tracer.analysis.table._columns import Entries
from tracer.analysis.table._sparse import _Sparse

__all__ = ["sorted_entries"]

_CHUNK = 1 << 14  # rows gathered at a time: the index arrays stay small
_PIECE = 1 << 20  # entries of a source column in one piece, when it is let go


def sorted_entries(owner: object, name: str, order: np.ndarray, release: bool) -> Entries:
    """The entries of the rows ``order`` lists of the :class:`_Sparse` ``owner.name``,
    rows renumbered in that order (a row's entries stay contiguous and in their order),
    gathered a chunk of rows at a time.

    With ``release``, each source column is first cut into pieces from its end (the
    column shrinking as they are taken), and a piece is let go once no later row needs
    it: rows come nearly in start order, so the entries are held about once, not
    twice, while they are sorted."""
    s: _Sparse = getattr(owner, name)
    src_ends = s.row_ends()
    sets = None if s.sets is None else np.frombuffer(s.rows, np.uint16).copy()
    lo_rows = range(0, order.size, _CHUNK)

    def chunk(lo: int) -> tuple[np.ndarray, np.ndarray]:
        rows = order[lo : lo + _CHUNK]
        first = np.where(rows > 0, src_ends[rows - 1], 0)
        return first, src_ends[rows] - first

    ends = np.empty(order.size, np.int64)
    need = np.zeros(len(lo_rows) + 1, np.int64)  # the first entry a chunk reads
    done = 0
    for c, lo in enumerate(lo_rows):
        first, lengths = chunk(lo)
        ends[lo : lo + lengths.size] = done + np.cumsum(lengths)
        done = int(ends[lo + lengths.size - 1])
        need[c] = first.min()
    need[-1] = np.iinfo(np.int64).max
    need = np.minimum.accumulate(need[::-1])[::-1]  # ... that it or a later one reads
    flat = []
    if sets is not None:  # each row's names, from its key set
        table = s.table()
        keys = np.empty(done, table[2].dtype)
        for lo in lo_rows:
            hi = min(lo + _CHUNK, order.size)
            out_lo = int(ends[lo - 1]) if lo else 0
            keys[out_lo : int(ends[hi - 1])] = s.spelled(sets[order[lo:hi]], table)[1]
        flat.append(keys)
        del sets
    for column in ("keys", "values") if s.sets is None else ("values",):
        source = getattr(s, column)
        code = source.typecode
        if release:
            pieces: list[np.ndarray | None] = _pieces(source)
            size = _PIECE
            setattr(s, column, array(code))
            del source
        else:
            pieces, size = (
                [np.frombuffer(source, code) if len(source) else None],
                max(1, len(source)),
            )
        out = np.empty(done, code)
        for c, lo in enumerate(lo_rows):
            first, lengths = chunk(lo)
            hi = lo + lengths.size
            out_lo = int(ends[lo - 1]) if lo else 0
            at = np.repeat(first - (ends[lo:hi] - lengths), lengths)
            at += np.arange(out_lo, int(ends[hi - 1]))
            _gather(pieces, size, at, out[out_lo : int(ends[hi - 1])])
            for p in range(min(len(pieces), int(need[c + 1]) // size)):  # read no more
                pieces[p] = None
        flat.append(out)
        del pieces
    if release:
        del src_ends
        setattr(owner, name, _Sparse(s.names, s.values.typecode))
    return Entries(ends, flat[0], flat[1])


def _pieces(source: array) -> list[np.ndarray | None]:
    """The items of ``source`` as arrays of ``_PIECE`` items (the last one shorter),
    cut from its end: ``source`` shrinks as they are taken and is empty after."""
    pieces: list[np.ndarray | None] = [None] * (-(-len(source) // _PIECE))
    for p in reversed(range(len(pieces))):
        pieces[p] = np.frombuffer(source[p * _PIECE :], source.typecode)
        del source[p * _PIECE :]
    return pieces


def _gather(pieces: list[np.ndarray | None], size: int, at: np.ndarray, out: np.ndarray) -> None:
    """``out[i] = source[at[i]]`` from ``source`` cut in ``pieces`` of ``size`` items."""
    if not at.size:
        return
    first, last = int(at.min()) // size, int(at.max()) // size
    for p in range(first, last + 1):
        piece = pieces[p]
        assert piece is not None  # (let go only once no later chunk reads it)
        if first == last:
            out[:] = piece[at - p * size]
        else:
            mine = (at >= p * size) & (at < (p + 1) * size)
            out[mine] = piece[at[mine] - p * size]
