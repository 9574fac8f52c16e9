"""The store's time partitions: one table of spans per slice of ingest, listed in a
catalog, written one at a time and dropped whole, oldest first.

Each partition is a table ``spans_NNNNNN`` of spans packed by trace, with an index by
start and a partial index by run (:mod:`collector._schema`). The collector writes into
the newest one and starts another when it has held it for the partition's time or
grown it by the partition's size (:class:`collector.retention.Retention`); every start
of a collector begins a partition too. A closed partition gets its index by trace id
then (:func:`seal`): one sort of a bounded partition, where the same index kept up
while writing costs every commit a page per row. The catalog (table ``partitions``)
keeps, per partition, the earliest and latest span start and the number of spans, so
that ``--since`` skips the partitions that end before it, and retention knows what is
old without reading spans.

Why tables, not one indexed table: an index by random trace ids costs ingest more the
larger it is (every batch dirties index pages all over it), and dropping a table frees
its pages in one step, where deleting the same spans from one big table deletes each
index entry at a random place (numbers in ``docs/collector.md``).

A trace is dropped whole: its spans that landed in a later partition (those that came
after the partition was closed) go with it. A view named ``spans`` unites the
partitions, for SQL by hand (``sqlite3 spans.db 'SELECT COUNT(*) FROM spans'``).

Stores made before partitions (one table ``spans``, no catalog) are read as they are;
opened for writing, their table becomes partition 0 and gets its indexes
(:func:`migrate`, once). Partitions of a row per span (made before spans were packed,
or migrated) are read and dropped as they are; new ones are packed.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass

from collector._schema import (
    ROW_INDEXES,
    TRACE_INDEX,
    is_packed,
    partition_schema,
    read_columns,
    view_select,
)

__all__ = [
    "CATALOG",
    "LAYOUT_VERSION",
    "Partition",
    "create_partition",
    "drop_partition",
    "has_catalog",
    "is_legacy",
    "list_partitions",
    "migrate",
    "record_rows",
    "seal",
]

#: ``PRAGMA user_version`` of a partitioned store (3: new partitions packed by trace).
LAYOUT_VERSION = 3
#: Later partitions searched for the spans of a dropped partition's traces: spans of a
#: trace that came after its partition was closed land in the next ones.
STRAGGLER_PARTITIONS = 2
#: The most partitions the ``spans`` view unites (SQLite's limit on a compound SELECT
#: is 500); past it the view holds the newest ones.
_VIEW_MAX = 400

CATALOG = """
CREATE TABLE IF NOT EXISTS partitions (
    number INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    created_ns INTEGER NOT NULL,
    first_start_ns INTEGER,
    last_start_ns INTEGER,
    spans INTEGER NOT NULL DEFAULT 0,
    runs_known INTEGER NOT NULL DEFAULT 1
);
"""


@dataclass(frozen=True)
class Partition:
    """One partition as the catalog lists it.

    Attributes:
        number: its place in time order (0 for a table from before partitions).
        name: its table.
        created_ns: when it was started.
        first_start_ns, last_start_ns: the earliest and latest span start in it (None
            when unknown: empty, or a table from before partitions read as it is).
        spans: the spans it holds (as written; an old table read as it is: -1).
        runs_known: its ``run`` column is filled for every span (false for a table
            from before runs were kept: ``--run`` then reads its attributes).
        indexed: it has its index by trace id (made when it is closed; the partition
            being written is read in full, or sorted, instead).
    """

    number: int
    name: str
    created_ns: int
    first_start_ns: int | None
    last_start_ns: int | None
    spans: int
    runs_known: bool = True
    indexed: bool = True


def _name(number: int) -> str:
    return f"spans_{number:06d}"


def is_legacy(conn: sqlite3.Connection) -> bool:
    """True for a store made before partitions: a table ``spans`` and no catalog."""
    kinds = dict(
        conn.execute(
            "SELECT name, type FROM sqlite_master WHERE name IN ('spans', 'partitions')"
        ).fetchall()
    )
    return kinds.get("spans") == "table" and "partitions" not in kinds


def _has_trace_index(conn: sqlite3.Connection, table: str) -> bool:
    for row in conn.execute(f"PRAGMA index_list({table})"):
        columns = [c[2] for c in conn.execute(f"PRAGMA index_info({row[1]})")]
        if columns[:1] == ["trace_id"]:
            return True
    return False


def _trace_indexed(conn: sqlite3.Connection) -> set[str]:
    """The partitions that have their index by trace id."""
    return {
        name[: -len("_by_trace")]
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'spans%by_trace'"
        )
    }


def seal(conn: sqlite3.Connection, partition: Partition) -> None:
    """Give a closed ``partition`` its index by trace id (one sort of its rows)."""
    with conn:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(TRACE_INDEX.format(t=partition.name))


def list_partitions(conn: sqlite3.Connection) -> list[Partition]:
    """The partitions of the store of ``conn``, oldest first (a store from before
    partitions: its one table, as it is)."""
    if is_legacy(conn):
        return [Partition(0, "spans", 0, None, None, -1, False, _has_trace_index(conn, "spans"))]
    rows = conn.execute(
        "SELECT number, name, created_ns, first_start_ns, last_start_ns, spans, runs_known "
        "FROM partitions ORDER BY number"
    ).fetchall()
    indexed = _trace_indexed(conn)
    return [
        Partition(number, name, created, first, last, spans, bool(known), name in indexed)
        for number, name, created, first, last, spans, known in rows
    ]


def _refresh_view(conn: sqlite3.Connection) -> None:
    names = [r[0] for r in conn.execute("SELECT name FROM partitions ORDER BY number DESC")]
    conn.execute("DROP VIEW IF EXISTS spans")
    if names:
        selects = [
            view_select(n, read_columns(conn, n, read_only=False))
            for n in reversed(names[:_VIEW_MAX])
        ]
        conn.execute("CREATE VIEW spans AS " + " UNION ALL ".join(selects))


def create_partition(conn: sqlite3.Connection, now_ns: int | None = None) -> Partition:
    """Start a partition after the newest, in a transaction of its own."""
    created = time.time_ns() if now_ns is None else now_ns
    with conn:
        conn.execute("BEGIN IMMEDIATE")  # the next number, as another writer may take one
        last = conn.execute("SELECT MAX(number) FROM partitions").fetchone()[0]
        number = 1 if last is None else int(last) + 1
        name = _name(number)
        for statement in partition_schema(name).split(";\n"):
            conn.execute(statement)
        conn.execute(
            "INSERT INTO partitions (number, name, created_ns) VALUES (?, ?, ?)",
            (number, name, created),
        )
        _refresh_view(conn)
        conn.execute(f"PRAGMA user_version={LAYOUT_VERSION}")
    return Partition(number, name, created, None, None, 0, indexed=False)


def has_catalog(conn: sqlite3.Connection) -> bool:
    """True when the store of ``conn`` has its catalog of partitions."""
    return (
        conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'partitions'").fetchone() is not None
    )


def record_rows(
    conn: sqlite3.Connection, partition: Partition, spans: int, first_ns: int, last_ns: int
) -> None:
    """Count ``spans`` written to ``partition`` starting between ``first_ns`` and
    ``last_ns`` (in the caller's transaction)."""
    conn.execute(
        "UPDATE partitions SET spans = spans + ?, "
        "first_start_ns = MIN(COALESCE(first_start_ns, ?), ?), "
        "last_start_ns = MAX(COALESCE(last_start_ns, ?), ?) WHERE number = ?",
        (spans, first_ns, first_ns, last_ns, last_ns, partition.number),
    )


def drop_partition(
    conn: sqlite3.Connection, partition: Partition, later: list[Partition]
) -> tuple[int, int]:
    """Drop ``partition`` and, from the first of ``later`` partitions, the spans of its
    traces, in one transaction; returns (spans, straggling spans) removed."""
    with conn:
        conn.execute("BEGIN IMMEDIATE")
        stragglers = 0
        for other in later[:STRAGGLER_PARTITIONS]:
            theirs = f"WHERE trace_id IN (SELECT trace_id FROM {partition.name})"
            packed = is_packed(read_columns(conn, other.name, read_only=False))
            if packed:
                (count,) = conn.execute(
                    f"SELECT COALESCE(SUM(spans), 0) FROM {other.name} {theirs}"
                ).fetchone()
                if not count:
                    continue
            cursor = conn.execute(f"DELETE FROM {other.name} {theirs}")
            count = int(count) if packed else cursor.rowcount
            if count:
                stragglers += count
                conn.execute(
                    "UPDATE partitions SET spans = spans - ? WHERE number = ?",
                    (count, other.number),
                )
        if conn.execute("SELECT 1 FROM events LIMIT 1").fetchone() is not None:
            conn.execute(
                f"DELETE FROM events WHERE trace_id IN (SELECT trace_id FROM {partition.name})"
            )
        conn.execute(f"DROP TABLE {partition.name}")
        conn.execute("DELETE FROM partitions WHERE number = ?", (partition.number,))
        _refresh_view(conn)
    return max(partition.spans, 0), stragglers


def migrate(conn: sqlite3.Connection) -> str | None:
    """Make a store from before partitions one (its table becomes partition 0, indexed);
    returns one line saying what was done, or None when there was nothing to do."""
    if not is_legacy(conn):
        if not has_catalog(conn):  # a new, empty store
            with conn:
                conn.execute(CATALOG)
            conn.execute(f"PRAGMA user_version={LAYOUT_VERSION}")
        return None
    started = time.monotonic()
    with conn:
        conn.execute("BEGIN IMMEDIATE")
        if not is_legacy(conn):  # another writer migrated it first
            return None
        name = _name(0)
        conn.execute(f"ALTER TABLE spans RENAME TO {name}")
        read_columns(conn, name, read_only=False)
        conn.execute(CATALOG)
        first, last, count = conn.execute(
            f"SELECT MIN(start_ns), MAX(start_ns), COUNT(*) FROM {name}"
        ).fetchone()
        for statement in ROW_INDEXES:
            conn.execute(statement.format(t=name))
        conn.execute(TRACE_INDEX.format(t=name))
        conn.execute(
            "INSERT INTO partitions VALUES (0, ?, ?, ?, ?, ?, 0)",
            (name, time.time_ns(), first, last, count),
        )
        _refresh_view(conn)
        conn.execute(f"PRAGMA user_version={LAYOUT_VERSION}")
    return (
        f"the store was made by an earlier version: indexed its {count:,} spans for "
        f"retention and reads by trace, run and time in {time.monotonic() - started:.1f} s "
        "(once; older hoptrace versions cannot write it any more)"
    )
