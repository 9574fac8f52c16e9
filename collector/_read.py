"""Reading the partitions of a store: which ones a read needs, and their pieces in
trace-id order.

Every read takes one snapshot of the store (one read transaction), so a purge that
drops a partition meanwhile changes nothing it sees: a trace is read whole or not at
all. A read in trace-id order merges the partitions' indexes by trace id (each
partition's rows come in index order; the partition being written, which has no index
by trace id yet, is sorted); ``since_ns`` leaves out the partitions that hold no span
starting after it, and ``run`` reads only the traces whose run matches, found through
each partition's index by run.

A **piece** is what one row gives: ``(trace id, earliest start, spans, body, seq)``
for a group of a packed partition, the same with ``1, None`` and then the row's
columns for a partition of a row per span (:mod:`collector._schema`); ``seq`` is its
place in the store and orders the pieces of a trace as they were written.
"""

from __future__ import annotations

import heapq
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from fnmatch import fnmatchcase

import orjson

from collector._schema import is_packed
from collector.partitions import STRAGGLER_PARTITIONS, Partition, list_partitions

__all__ = [
    "SEQ_BITS",
    "in_partitions",
    "PIECE_FIELDS",
    "matching_trace_ids",
    "pieces_in_trace_order",
    "snapshot",
    "started_after",
    "trace_id_sample",
    "wanted",
]

#: A row's place in the store is ``partition number << SEQ_BITS | rowid``.
SEQ_BITS = 40
#: The fields of a piece before a row's columns (see the module docstring).
PIECE_FIELDS = 5
#: Trace ids per query when reading the traces of a run.
_IDS_PER_QUERY = 2_000


@contextmanager
def snapshot(conn: sqlite3.Connection) -> Iterator[list[Partition]]:
    """One read transaction on ``conn`` (unless one is open) and the partitions in it."""
    began = not conn.in_transaction
    if began:
        conn.execute("BEGIN")
    try:
        yield list_partitions(conn)
    finally:
        try:
            if began and conn.in_transaction:
                conn.execute("COMMIT")
        except sqlite3.ProgrammingError:  # closed before the reader finished
            pass


def wanted(
    partitions: list[Partition], since_ns: int | None
) -> tuple[list[Partition], list[Partition]]:
    """(the partitions a read from ``since_ns`` needs, the partitions whose spans of a
    trace read must be looked up): a partition whose latest span started before
    ``since_ns`` holds nothing of a trace that started after it, but a trace read may
    have a span there (the newest skipped ones), or, unread, in a partition read only
    in part (an indexed one that began before ``since_ns``)."""
    if since_ns is None:
        return partitions, []
    keep = [p for p in partitions if p.last_start_ns is None or p.last_start_ns >= since_ns]
    skipped = [p for p in partitions if p not in keep]
    return keep, skipped[-STRAGGLER_PARTITIONS:] + [p for p in keep if _in_part(p, since_ns)]


def _in_part(part: Partition, since_ns: int | None) -> bool:
    """True when only the traces of ``part`` with a span after ``since_ns`` are read."""
    return since_ns is not None and part.indexed and (part.first_start_ns or 0) < since_ns


def matching_trace_ids(
    conn: sqlite3.Connection, partitions: list[Partition], pattern: str
) -> list[str] | None:
    """The sorted ids of the traces with a span whose run matches the glob ``pattern``,
    through the index by run; None when a partition does not know its runs."""
    if not all(p.runs_known for p in partitions):
        return None
    ids: set[str] = set()
    for part in partitions:
        labels = [
            label
            for (label,) in conn.execute(
                f"SELECT DISTINCT run FROM {part.name} WHERE run IS NOT NULL"
            )
            if isinstance(label, str) and fnmatchcase(label, pattern)
        ]
        if labels:
            marks = ",".join("?" * len(labels))
            ids.update(
                t
                for (t,) in conn.execute(
                    f"SELECT trace_id FROM {part.name} WHERE run IN ({marks})", labels
                )
            )
    return sorted(ids)


def _cursor_rows(
    conn: sqlite3.Connection,
    part: Partition,
    columns: str,
    where: str,
    params: tuple,
    chunk: int,
) -> Iterator[tuple]:
    """The pieces of ``part`` in trace-id order."""
    seq = f"({part.number} << {SEQ_BITS}) | rowid"
    if is_packed(columns):
        what = f"trace_id, start_ns, spans, body, {seq}"
    else:
        what = f"trace_id, start_ns, 1, NULL, {seq}, {columns}"
    cursor = conn.execute(f"SELECT {what} FROM {part.name}{where} ORDER BY trace_id, rowid", params)
    try:
        while rows := cursor.fetchmany(chunk):
            yield from rows
    finally:
        try:
            cursor.close()
        except sqlite3.ProgrammingError:  # the store was closed first
            pass


def _seq_order(piece: tuple) -> tuple[str, int]:
    return piece[0], piece[4]


def pieces_in_trace_order(
    conn: sqlite3.Connection,
    partitions: list[Partition],
    columns: dict[str, str],
    bounds: tuple[str | None, str | None],
    trace_ids: list[str] | None,
    chunk: int,
    since_ns: int | None = None,
) -> Iterator[tuple]:
    """The pieces of ``partitions`` (with ``lo <= trace_id < hi`` for ``bounds``, and
    among ``trace_ids`` when given) in trace-id order, the pieces of one trace in the
    order they were written. ``columns`` by partition name. In a partition that began
    before ``since_ns``, only the traces with a span that started after it are read
    (found by the index by start)."""
    clauses: list[str] = []
    params: list[object] = []
    lo, hi = bounds
    if lo is not None:
        clauses.append("trace_id >= ?")
        params.append(lo)
    if hi is not None:
        clauses.append("trace_id < ?")
        params.append(hi)
    per = max(256, chunk // max(1, len(partitions)))
    if trace_ids is None:
        streams = []
        for p in partitions:
            mine, values = list(clauses), list(params)
            if _in_part(p, since_ns):
                latest = "last_start_ns" if is_packed(columns[p.name]) else "start_ns"
                mine.append(f"trace_id IN (SELECT trace_id FROM {p.name} WHERE {latest} >= ?)")
                values.append(since_ns)
            where = " WHERE " + " AND ".join(mine) if mine else ""
            streams.append(_cursor_rows(conn, p, columns[p.name], where, tuple(values), per))
        yield from streams[0] if len(streams) == 1 else heapq.merge(*streams, key=_seq_order)
        return
    ids = [t for t in trace_ids if (lo is None or t >= lo) and (hi is None or t < hi)]
    for i in range(0, len(ids), _IDS_PER_QUERY):
        batch = orjson.dumps(ids[i : i + _IDS_PER_QUERY]).decode()
        where = " WHERE trace_id IN (SELECT value FROM json_each(?))"
        streams = [_cursor_rows(conn, p, columns[p.name], where, (batch,), per) for p in partitions]
        yield from heapq.merge(*streams, key=_seq_order)


def in_partitions(
    conn: sqlite3.Connection, partitions: list[Partition], trace_id: str, before_ns: int
) -> bool:
    """True when a span of ``trace_id`` that started before ``before_ns`` is in one of
    ``partitions`` (by their index by trace id)."""
    return any(
        conn.execute(
            f"SELECT 1 FROM {p.name} WHERE trace_id = ? AND start_ns < ? LIMIT 1",
            (trace_id, before_ns),
        ).fetchone()
        is not None
        for p in partitions
    )


def trace_id_sample(conn: sqlite3.Connection, partitions: list[Partition], size: int) -> list[str]:
    """The trace ids of about ``size`` rows spread evenly over ``partitions`` (by rowid
    in each), sorted."""
    found: list[str] = []
    ranges = [
        (p, *conn.execute(f"SELECT MIN(rowid), MAX(rowid) FROM {p.name}").fetchone())
        for p in partitions
    ]
    total = sum(high - low + 1 for _, low, high in ranges if low is not None)
    for part, low, high in ranges:
        if low is None:
            continue
        share = max(1, size * (high - low + 1) // max(total, 1))
        step = max(1, (high - low + 1) // share)
        rowids = list(range(low, high + 1, step))
        for i in range(0, len(rowids), 500):
            batch = rowids[i : i + 500]
            marks = ",".join("?" * len(batch))
            found.extend(
                row[0]
                for row in conn.execute(
                    f"SELECT trace_id FROM {part.name} WHERE rowid IN ({marks})", batch
                )
                if isinstance(row[0], str)
            )
    return sorted(found)


def started_after(
    conn: sqlite3.Connection, pieces: list[tuple], since_ns: int | None, skipped: list[Partition]
) -> bool:
    """True when the trace of ``pieces`` started at or after ``since_ns``: none of them
    started before, nor a span of it in ``skipped`` (partitions not read whole)."""
    if since_ns is None:
        return True
    if min(p[1] if isinstance(p[1], int) else since_ns for p in pieces) < since_ns:
        return False
    return not in_partitions(conn, skipped, pieces[0][0], since_ns)
