"""A span as a store row and back, and where stores are and how they are opened.

:func:`span_row` makes the row the writer stores (its fields in column order,
attributes as JSON, its run last); :func:`span_of_row` reads one back as a
:class:`~tracer.spans.model.Span`, checked as spans from files are.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from pathlib import Path

import orjson

from collector._events import Events
from tracer._errors import SourceError
from tracer.attributes import RUN
from tracer.spans._numbers import checked, needs_check
from tracer.spans.events import with_events
from tracer.spans.model import Span, Warnings

__all__ = [
    "STORE_HEADER",
    "connect_read_only",
    "default_store_path",
    "is_store_file",
    "size_of",
    "span_of_row",
    "span_row",
    "unreadable",
]


def default_store_path() -> Path:
    """``$HOPTRACE_STORE``, else ``$XDG_DATA_HOME/hoptrace/spans.db``
    (``~/.local/share/hoptrace/spans.db``)."""
    env = os.environ.get("HOPTRACE_STORE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "hoptrace" / "spans.db"


#: The first bytes of every SQLite file.
STORE_HEADER = b"SQLite format 3\x00"


def is_store_file(path: Path) -> bool:
    """True when ``path`` is an SQLite file (checked by its header)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == STORE_HEADER
    except OSError:
        return False


def connect_read_only(path: Path) -> sqlite3.Connection:
    """A connection that never writes: ``mode=ro``, else (a WAL store whose folder
    cannot take the ``-shm`` index SQLite needs) ``immutable=1``."""
    uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=30)
    try:
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        return conn
    except sqlite3.OperationalError:
        conn.close()
    # Nobody can write a store in a folder that is read-only, so it cannot change
    # while it is read as immutable.
    return sqlite3.connect(uri + "&immutable=1", uri=True, check_same_thread=False)


def span_row(span: Span) -> tuple:
    """The store row of ``span``: its fields in column order, attributes as JSON.

    Raises:
        TypeError, ValueError: the attributes hold something JSON cannot carry (an
            integer wider than 64 bits, a non-string key, nesting past 254 levels).
    """
    return (
        span.trace_id,
        span.span_id,
        span.parent_id,
        span.service,
        span.name,
        span.kind,
        span.start_ns,
        span.end_ns,
        span.stage,
        span.status,
        span.first_token_ns,
        # A copy: orjson's own result keeps a 4 KiB buffer whatever its length, which
        # made queued rows take 4 KiB per span.
        memoryview(orjson.dumps(span.attributes, default=str)).tobytes(),
        span.trace_state,
        run if isinstance(run := span.attributes.get(RUN), str) else None,
    )


def size_of(path: Path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def span_of_row(row: tuple, tally: Warnings, events: Events | None = None) -> Span | None:
    """A stored row as a :class:`Span` with its stored ``events`` read as its span
    events (:mod:`tracer.spans.events`), or None (counted in ``tally``) when unusable."""
    if not row[0] or not row[1] or not isinstance(row[6], int) or not isinstance(row[7], int):
        tally.skip("store rows without ids or times were skipped")
        return None
    if row[7] < row[6]:
        tally.skip("store rows that end before they start were skipped")
        return None
    try:
        attributes = orjson.loads(row[11])
    except (orjson.JSONDecodeError, TypeError):
        tally.skip("store rows whose attributes are not JSON were skipped")
        return None
    if not isinstance(attributes, dict):
        tally.skip("store rows whose attributes are not a JSON object were skipped")
        return None
    span = Span(
        trace_id=row[0],
        span_id=row[1],
        parent_id=row[2],
        service=row[3],
        name=row[4],
        kind=row[5],
        start_ns=row[6],
        end_ns=row[7],
        stage=row[8],
        status=row[9],
        first_token_ns=row[10],
        attributes=attributes,
        trace_state=row[12] if isinstance(row[12], str) and row[12] else None,
    )
    if events:
        own = events.get((row[0], row[1]))
        if own is not None:
            span = with_events(span, own)
    return span if not needs_check(span) else checked(span, tally)


def unreadable(path: Path, exc: sqlite3.DatabaseError) -> SourceError:
    """The one error to raise for ``exc`` on the store at ``path``, with what to do."""
    where = str(path)
    if "readonly" in str(exc) or "read-only" in str(exc):
        return SourceError(
            f"cannot write the span store {where!r} ({exc}); give a store in a folder "
            "you can write (--store), or fix its permissions"
        )
    if "locked" in str(exc) or "busy" in str(exc):
        return SourceError(
            f"the span store {where!r} is busy ({exc}); is another collector writing "
            "it? Give each collector its own --store"
        )
    if isinstance(exc, sqlite3.OperationalError) and "malformed" not in str(exc):
        return SourceError(f"cannot read the span store {where!r} ({exc})")
    return SourceError(
        f"the span store {where!r} is damaged ({exc}); copy out what can be read with "
        f"'sqlite3 {where} .recover | sqlite3 new.db', or start a new store"
    )
