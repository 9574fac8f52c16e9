"""The columns of a stored span, the table of one partition and its indexes.

A partition holds spans **packed by trace**: a row per trace of each committed batch
(a "group"), its spans in one JSON array of span arrays (``body``: each span's fields
in the order of :class:`~tracer.spans.model.Span`, its attributes the JSON object they
were always stored as), beside the columns the reads and retention look things up by:
``trace_id``, the earliest and latest start of its spans (``start_ns``,
``last_start_ns``), its ``run`` (the ``hoptrace.run`` of its spans; a trace whose
spans of one batch name two runs gets a group per run) and how many spans it holds.
A read turns a group into spans with one call of a compiled decoder, where a row per
span took a Python call per field (numbers in ``docs/collector.md``).

Partitions made before spans were packed hold a row per span (:data:`COLUMNS`): its
fields and, last, ``run``. They are read as they are (:func:`is_packed` tells them
apart). Stores made before partitions hold their spans in one such table named
``spans``, made before spans kept their trace state (``trace_state``) or their run
(``run``): such a table gets the columns when the store is opened for writing, and is
read without them otherwise (:func:`read_columns`).
"""

from __future__ import annotations

import sqlite3

__all__ = [
    "COLUMNS",
    "GROUP",
    "GROUP_COLUMNS",
    "GROUP_FIELDS",
    "INDEXES",
    "PACKED",
    "ROW",
    "ROW_FIELDS",
    "ROW_INDEXES",
    "TRACE_INDEX",
    "is_packed",
    "partition_schema",
    "read_columns",
    "view_select",
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

_GROUP_FIELDS = """
    trace_id TEXT NOT NULL,
    start_ns INTEGER NOT NULL,
    last_start_ns INTEGER NOT NULL,
    run TEXT,
    spans INTEGER NOT NULL,
    body BLOB NOT NULL
"""
#: The columns of a packed partition, in the order of a group row.
GROUP_COLUMNS = "trace_id, start_ns, last_start_ns, run, spans, body"
#: Fields of a group row (:func:`collector._rows.group_rows`).
GROUP_FIELDS = 6
#: One group row's placeholders.
GROUP = "(" + ",".join("?" * GROUP_FIELDS) + ")"
#: ``read_columns`` of a packed partition.
PACKED = "packed"

#: The indexes a partition ``{t}`` has while it is written: by the latest start of a
#: group (``--since`` within a partition; starts come nearly in order, so it grows at
#: its end) and the partial one by run (a group or two per trace).
INDEXES = (
    "CREATE INDEX IF NOT EXISTS {t}_by_start ON {t} (last_start_ns)",
    "CREATE INDEX IF NOT EXISTS {t}_by_run ON {t} (run) WHERE run IS NOT NULL",
)
#: The same for a partition of a row per span (:func:`collector.partitions.migrate`).
ROW_INDEXES = (
    "CREATE INDEX IF NOT EXISTS {t}_by_start ON {t} (start_ns)",
    "CREATE INDEX IF NOT EXISTS {t}_by_run ON {t} (run) WHERE run IS NOT NULL",
)
#: The index by trace id (a trace by id, the read in trace-id order, the traces a purge
#: takes whole), made when the partition is closed: kept up while writing, its random
#: keys dirty a page per span in every commit, which cost ingest 2.3x.
TRACE_INDEX = "CREATE INDEX IF NOT EXISTS {t}_by_trace ON {t} (trace_id)"


def partition_schema(table: str) -> str:
    """The statements that make the packed partition ``table`` with the indexes it has
    while it is written."""
    return ";\n".join(
        [
            f"CREATE TABLE IF NOT EXISTS {table} ({_GROUP_FIELDS})",
            *(i.format(t=table) for i in INDEXES),
        ]
    )


def is_packed(columns: str) -> bool:
    """True when ``columns`` (of :func:`read_columns`) are a packed partition's."""
    return columns == PACKED


#: A packed span's fields as the view's columns (``attributes`` as JSON text).
_VIEW_FIELDS = (
    "span_id", "parent_id", "service", "name", "kind", "start_ns", "end_ns", "stage",
    "status", "first_token_ns", "attributes", "trace_state",
)  # fmt: skip


def view_select(table: str, columns: str) -> str:
    """The SELECT of ``table`` in the ``spans`` view: a row per span, the columns of
    :data:`COLUMNS` (a packed partition's groups spread out with ``json_each``)."""
    if not is_packed(columns):
        return f"SELECT {columns} FROM {table}"
    fields = ", ".join(
        f"json_extract(s.value, '$[{i}]') AS {name}" for i, name in enumerate(_VIEW_FIELDS, 1)
    )
    return (
        f"SELECT g.trace_id AS trace_id, {fields}, g.run AS run "
        f"FROM {table} AS g, json_each(g.body) AS s"
    )


def read_columns(conn: sqlite3.Connection, table: str, read_only: bool) -> str:
    """The columns to read from ``table`` (see the module docstring): :data:`PACKED` for
    a packed partition; of a row per span, an older table opened for writing gets the
    missing ones, and read only, NULL stands in for them."""
    have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    if "body" in have:
        return PACKED
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
