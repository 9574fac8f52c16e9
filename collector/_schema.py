"""The spans table: its schema, the columns a row holds, and a store made before spans
kept their trace state (the ``trace_state`` column), which gets the column when it is
opened for writing and is read without it otherwise."""

from __future__ import annotations

import sqlite3

__all__ = ["COLUMNS", "ROW", "SCHEMA", "read_columns"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS spans (
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
    trace_state TEXT
);
"""
COLUMNS = (
    "trace_id, span_id, parent_id, service, name, kind, start_ns, end_ns, stage, status, "
    "first_token_ns, attributes, trace_state"
)
#: One row's placeholders.
ROW = "(?,?,?,?,?,?,?,?,?,?,?,?,?)"
_OLD_COLUMNS = COLUMNS.replace("trace_state", "NULL")


def read_columns(conn: sqlite3.Connection, read_only: bool) -> str:
    """The columns to read from the store of ``conn`` (see the module docstring)."""
    if any(row[1] == "trace_state" for row in conn.execute("PRAGMA table_info(spans)")):
        return COLUMNS
    if read_only:
        return _OLD_COLUMNS
    try:
        conn.execute("ALTER TABLE spans ADD COLUMN trace_state TEXT")
    except sqlite3.OperationalError as exc:  # another writer added it first
        if "duplicate column" not in str(exc):
            raise
    return COLUMNS
