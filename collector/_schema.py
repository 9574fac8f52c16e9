"""The columns of a stored span, the table of one partition and its indexes.

A row holds a span's fields and, last, ``run``: its ``hoptrace.run`` when it carries
one (most spans do not), so that ``--run`` and the runs listing find their traces
through a small partial index instead of reading every span's attributes.

Stores made before partitions hold their spans in one table named ``spans``, made
before spans kept their trace state (``trace_state``) or their run (``run``): such a
table gets the columns when the store is opened for writing, and is read without them
otherwise (:func:`read_columns`).
"""

from __future__ import annotations

import sqlite3

__all__ = [
    "COLUMNS",
    "INDEXES",
    "ROW",
    "ROW_FIELDS",
    "TRACE_INDEX",
    "partition_schema",
    "read_columns",
]

_FIELDS = """
    trace_id TEXT NOT NULL,
    span_id TEXT NOT NULL,
    parent_id TEXT,
    service TEXT NOT NULL,
    name TEXT NOT NULL,
    kind INTEGER NOT NULL,
    start_ns INTEGER NOT NULL,
    end_ns INTEGER NOT NULL,
    stage TEXT,
    status INTEGER NOT NULL,
    first_token_ns INTEGER,
    attributes BLOB NOT NULL,
    trace_state TEXT,
    run TEXT
"""
COLUMNS = (
    "trace_id, span_id, parent_id, service, name, kind, start_ns, end_ns, stage, status, "
    "first_token_ns, attributes, trace_state, run"
)
#: Fields of a span row (:func:`collector.store.span_row`).
ROW_FIELDS = 14
#: One row's placeholders.
ROW = "(" + ",".join("?" * ROW_FIELDS) + ")"

#: The indexes a partition ``{t}`` has while it is written: by start (``--since``
#: within a partition; starts come nearly in order, so it grows at its end) and the
#: partial one by run (a span or two per trace).
INDEXES = (
    "CREATE INDEX IF NOT EXISTS {t}_by_start ON {t} (start_ns)",
    "CREATE INDEX IF NOT EXISTS {t}_by_run ON {t} (run) WHERE run IS NOT NULL",
)
#: The index by trace id (a trace by id, the read in trace-id order, the traces a purge
#: takes whole), made when the partition is closed: kept up while writing, its random
#: keys dirty a page per span in every commit, which cost ingest 2.3x.
TRACE_INDEX = "CREATE INDEX IF NOT EXISTS {t}_by_trace ON {t} (trace_id)"


def partition_schema(table: str) -> str:
    """The statements that make the partition ``table`` with the indexes it has while
    it is written."""
    return ";\n".join(
        [f"CREATE TABLE IF NOT EXISTS {table} ({_FIELDS})", *(i.format(t=table) for i in INDEXES)]
    )


def read_columns(conn: sqlite3.Connection, table: str, read_only: bool) -> str:
    """The columns to read from ``table`` (see the module docstring): an older table
    opened for writing gets the missing ones; read only, NULL stands in for them."""
    have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    missing = [c for c in ("trace_state", "run") if c not in have]
    if not missing:
        return COLUMNS
    if read_only:
        return ", ".join("NULL" if c.strip() in missing else c.strip() for c in COLUMNS.split(","))
    for column in missing:
        try:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")
        except sqlite3.OperationalError as exc:  # another writer added it first
            if "duplicate column" not in str(exc):
                raise
    return COLUMNS
