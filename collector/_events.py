"""The store's table of span events that came as OTLP log records (:mod:`collector.logs`).

A row per event: the trace and span id of its span, its name, time and attributes
(JSON). The table is read beside the spans and each span's events are applied to it
as its span events (:func:`tracer.spans.events.with_events`); it has an index by trace
id, since events are few next to spans.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

import orjson

from tracer.spans.events import EventRecord
from tracer.spans.logs import LogEvent

__all__ = [
    "EVENTS_SCHEMA",
    "EVENT_ROW_FIELDS",
    "INSERT_EVENT",
    "Events",
    "event_row",
    "read_events",
]

EVENTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    trace_id TEXT NOT NULL,
    span_id TEXT NOT NULL,
    name TEXT NOT NULL,
    time_ns INTEGER NOT NULL,
    attributes BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_trace ON events (trace_id);
"""
#: The length of a row made by :func:`event_row` (a span row has 12 fields).
EVENT_ROW_FIELDS = 5
INSERT_EVENT = "INSERT INTO events VALUES (?,?,?,?,?)"
#: Stored events by (trace id, span id).
Events = dict[tuple[str, str], list[EventRecord]]


def event_row(event: LogEvent) -> tuple:
    """The store row of a span's event that came as a log record.

    Raises:
        TypeError, ValueError: its attributes cannot be stored as JSON.
    """
    return (
        event.trace_id,
        event.span_id,
        event.name,
        event.time_ns,
        memoryview(orjson.dumps(event.attributes, default=str)).tobytes(),
    )


def read_events(conn: sqlite3.Connection, where: str, params: Iterable[object]) -> Events:
    """The stored events (of the traces ``where`` selects: ``" WHERE ..."`` or ``""``)
    by span; none from a store made before events were kept. Rows that cannot be read
    are left out.

    Raises:
        sqlite3.DatabaseError: the store cannot be read.
    """
    query = "SELECT trace_id, span_id, name, time_ns, attributes FROM events" + where
    out: Events = {}
    try:
        rows = conn.execute(query, tuple(params)).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return out
        raise
    for trace_id, span_id, name, time_ns, blob in rows:
        try:
            attributes = orjson.loads(blob)
        except (orjson.JSONDecodeError, TypeError):
            continue
        if isinstance(attributes, dict) and isinstance(time_ns, int):
            out.setdefault((trace_id, span_id), []).append((str(name), time_ns, attributes))
    return out
