"""The span store: SQLite in WAL mode, one writer and any number of readers.

The receiver writes batches with :meth:`SpanStore.write_rows` (rows made by
:func:`span_row`, off the writer's thread); :meth:`SpanStore.write` does both for a
list of spans. The analyzer, in this or another process, reads spans back as
:class:`tracer.spans.model.Span` while ingest goes on.

A span already committed through this store object (one of the most recent
``recent_keys // 2`` to ``recent_keys``; retries and re-sent batches land there) is not
written again, and the analyzer keeps one span per (trace id, span id) on reading. The
recent keys are two generations of sets, so a write costs the same per span however
many spans are stored and however large the group commit. The table has no unique
index on purpose: random trace ids make every batch dirty hundreds of index pages,
which cut ingest fivefold.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import chain
from pathlib import Path

import orjson

from collector._events import (
    EVENT_ROW_FIELDS,
    EVENTS_SCHEMA,
    INSERT_EVENT,
    Events,
    event_row,
    read_events,
)
from collector._recent import RecentKeys
from collector._schema import COLUMNS, ROW, SCHEMA, read_columns
from tracer._errors import SourceError
from tracer.spans._numbers import checked, needs_check
from tracer.spans.events import with_events
from tracer.spans.model import Span, Warnings

__all__ = [
    "EVENT_ROW_FIELDS",
    "SpanStore",
    "default_store_path",
    "event_row",
    "is_store_file",
    "span_row",
]

#: Rows per INSERT statement. sqlite3 lets go of the GIL for every statement it steps,
#: and with the receiver's threads busy, taking it back costs up to the switch interval
#: (5 ms): one statement per row made writing 4 to 20 times slower under load.
_ROWS_PER_STATEMENT = 256


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


def _connect_read_only(path: Path) -> sqlite3.Connection:
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
    )


class SpanStore:
    """A span store at ``path`` (created when ``create`` is true).

    Args:
        path: the SQLite file.
        create: create the file and schema if missing; else a missing file raises.
        synchronous: SQLite ``synchronous`` pragma: ``NORMAL`` (default; a committed
            batch survives a crash of the process) or ``FULL`` (survives power loss).
        recent_keys: how many recently written spans are checked for duplicates (the
            last ``recent_keys // 2`` to ``recent_keys``; about 80 bytes each).
        read_only: open for reading only (``mode=ro``), as the analysis does: nothing
            is written, so a store in a read-only folder or on a read-only disk is read
            too (then as an immutable file, since SQLite cannot make its WAL index).

    A quick check on opening reads the pages every write goes through; a store that
    is damaged elsewhere raises :class:`SourceError` when that part is read. Opened
    for writing, a store that cannot be written raises at once.

    Raises:
        SourceError: the file is missing (and ``create`` is false), not a store,
            damaged, or (not ``read_only``) cannot be written.
        ValueError: ``recent_keys`` is below 2, or ``create`` with ``read_only``.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        create: bool = False,
        synchronous: str = "NORMAL",
        recent_keys: int = 500_000,
        read_only: bool = False,
    ):
        if recent_keys < 2:
            raise ValueError(f"recent_keys must be at least 2, got {recent_keys!r}")
        self.path = Path(path)
        self._recent = RecentKeys(recent_keys)
        if not create and not self.path.exists():
            raise SourceError(
                f"no span store at {str(self.path)!r}; run 'hoptrace collect' (or "
                "'hoptrace demo') first, or pass a trace file"
            )
        if create and read_only:
            raise ValueError("a store opened read_only cannot be created")
        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.read_only = read_only
        try:
            if read_only:
                self._conn = _connect_read_only(self.path)
            else:
                self._conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute(f"PRAGMA synchronous={synchronous}")
                if create:
                    self._conn.executescript(SCHEMA + EVENTS_SCHEMA)
            self._conn.execute("SELECT 1 FROM spans LIMIT 1").fetchall()
            self._columns = read_columns(self._conn, read_only)
        except sqlite3.DatabaseError as exc:
            raise SourceError(f"{str(self.path)!r} is not a hoptrace span store ({exc})") from exc
        try:
            # A cheap look at the pages every write goes through (the rightmost path of
            # the table), instead of a full integrity check that reads the whole file.
            self._conn.execute("SELECT MAX(rowid) FROM spans").fetchone()
            if not read_only:
                self._probe_write()
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise self._unreadable(exc) from exc
        variables = self._conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        self._rows_per_statement = max(1, min(_ROWS_PER_STATEMENT, variables // 13))
        self._insert_many = f"INSERT INTO spans ({COLUMNS}) VALUES " + ",".join(
            [ROW] * self._rows_per_statement
        )
        self._lock = threading.Lock()

    def _probe_write(self) -> None:
        """Raise now, not at the first batch, when the file cannot be written."""
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            self._conn.execute(f"PRAGMA user_version={int(version)}")
        finally:
            self._conn.execute("ROLLBACK")

    def _unreadable(self, exc: sqlite3.DatabaseError) -> SourceError:
        where = str(self.path)
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

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """Turn SQLite's errors while reading into one :class:`SourceError`."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise self._unreadable(exc) from exc

    def write(self, spans: Iterable[Span]) -> int:
        """Store spans in one transaction; returns how many were new (not duplicates).

        Raises:
            TypeError, ValueError: a span's attributes cannot be stored (see
                :func:`span_row`); nothing of the batch is stored then.
        """
        return self.write_rows([span_row(s) for s in spans])

    def write_rows(self, rows: list[tuple]) -> int:
        """Store rows made by :func:`span_row` (and :func:`event_row`, told by their
        length) in one transaction; returns how many were new.

        A row whose (trace id, span id) this store committed recently, or that comes
        twice in ``rows``, is written once. Keys are remembered only after the commit,
        so a batch that failed is written in full when it is sent again.
        """
        with self._lock:
            recent = self._recent
            new, old = recent.new, recent.old
            fresh = []
            events = []
            batch: dict[bytes, None] = {}  # in order: the newest keys are remembered longest
            for row in rows:
                if len(row) == EVENT_ROW_FIELDS:
                    events.append(row)
                    continue
                try:
                    key = bytes.fromhex(row[0] + row[1])
                except (TypeError, ValueError):  # ids that are not hex, from other writers
                    key = f"{row[0]}/{row[1]}".encode()
                if key in new or key in old or key in batch:
                    continue
                batch[key] = None
                fresh.append(row)
            per = self._rows_per_statement
            whole = len(fresh) - len(fresh) % per
            with self._conn:
                if whole:
                    self._conn.executemany(
                        self._insert_many,
                        (
                            tuple(chain.from_iterable(fresh[i : i + per]))
                            for i in range(0, whole, per)
                        ),
                    )
                if whole < len(fresh):
                    self._conn.executemany(
                        f"INSERT INTO spans ({COLUMNS}) VALUES {ROW}", fresh[whole:]
                    )
                if events:
                    self._conn.executemany(INSERT_EVENT, events)
            recent.update(batch)
            return len(fresh) + len(events)

    def count(self) -> int:
        """Number of stored spans."""
        with self._lock, self._reading():
            return int(self._conn.execute("SELECT COUNT(*) FROM spans").fetchone()[0])

    def iter_spans(
        self, since_ns: int | None = None, warnings: Warnings | None = None
    ) -> Iterator[Span]:
        """Every stored span (of traces that started at or after ``since_ns``).

        Rows are checked as file spans are: a row whose attributes are not JSON, whose
        ids are empty or whose end is before its start is skipped and counted in
        ``warnings``, not raised.
        """
        query = f"SELECT {self._columns} FROM spans"
        params: tuple = ()
        if since_ns is not None:
            query += (
                " WHERE trace_id IN (SELECT trace_id FROM spans GROUP BY trace_id "
                "HAVING MIN(start_ns) >= ?)"
            )
            params = (since_ns,)
        with self._lock, self._reading():
            rows = self._conn.execute(query, params).fetchall()
        events = self._events("", ())
        tally = warnings if warnings is not None else Warnings()
        for row in rows:
            span = _span_of_row(row, tally, events)
            if span is not None:
                yield span

    def _events(self, where: str, params: Iterable[object]) -> Events:
        """The stored events (of the traces ``where`` selects) by span."""
        with self._lock, self._reading():
            return read_events(self._conn, where, params)

    def events_of(self, trace_ids: Iterable[str]) -> Events:
        """The stored events of ``trace_ids`` (log records kept with their spans), by
        (trace id, span id): ``(name, time_ns, attributes)`` each."""
        ids = sorted(set(trace_ids))
        return self._events(f" WHERE trace_id IN ({','.join('?' * len(ids))})", ids)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SpanStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def iter_trace_rows(
        self,
        since_ns: int | None = None,
        warnings: Warnings | None = None,
        chunk: int = 20_000,
        trace_ids: tuple[str | None, str | None] = (None, None),
    ) -> Iterator[tuple[int, Span]]:
        """``(rowid, span)`` of every stored span in trace-id order (rows of one trace
        in the order they were written), read ``chunk`` rows at a time, so a reader
        holds one chunk, not the store. Rows are checked as in :meth:`iter_spans`.
        ``trace_ids`` = (lo, hi) keeps the traces with ``lo <= trace_id < hi`` (None:
        no bound), so that separate readers can take separate parts of the store.
        """
        clauses: list[str] = []
        params: list[object] = []
        lo, hi = trace_ids
        if lo is not None:
            clauses.append("trace_id >= ?")
            params.append(lo)
        if hi is not None:
            clauses.append("trace_id < ?")
            params.append(hi)
        if since_ns is not None:
            clauses.append(
                "trace_id IN (SELECT trace_id FROM spans GROUP BY trace_id "
                "HAVING MIN(start_ns) >= ?)"
            )
            params.append(since_ns)
        query = f"SELECT {self._columns}, rowid FROM spans"
        if clauses:
            query += " WHERE " + " AND ".join(clauses)
        query += " ORDER BY trace_id, rowid"
        tally = warnings if warnings is not None else Warnings()
        bounds = [c for c in clauses[:2] if not c.startswith("trace_id IN")]
        events = self._events(
            " WHERE " + " AND ".join(bounds) if bounds else "", params[: len(bounds)]
        )
        with self._lock, self._reading():
            cursor = self._conn.execute(query, tuple(params))
        try:
            while True:
                with self._lock, self._reading():
                    rows = cursor.fetchmany(chunk)
                if not rows:
                    return
                for row in rows:
                    span = _span_of_row(row, tally, events)
                    if span is not None:
                        yield row[13], span
        finally:
            cursor.close()

    def trace_id_sample(self, size: int) -> list[str]:
        """The trace ids of about ``size`` rows spread evenly over the store (by rowid),
        sorted: where to cut it into parts of about equal size, without a full scan."""
        with self._lock, self._reading():
            low, high = self._conn.execute("SELECT MIN(rowid), MAX(rowid) FROM spans").fetchone()
        if low is None:
            return []
        step = max(1, (high - low + 1) // max(size, 1))
        rowids = list(range(low, high + 1, step))
        found: list[str] = []
        with self._lock, self._reading():
            for i in range(0, len(rowids), 500):
                batch = rowids[i : i + 500]
                marks = ",".join("?" * len(batch))
                found.extend(
                    row[0]
                    for row in self._conn.execute(
                        f"SELECT trace_id FROM spans WHERE rowid IN ({marks})", batch
                    )
                    if isinstance(row[0], str)
                )
        return sorted(found)

    def spans_of(self, trace_ids: Iterable[str]) -> Iterator[Span]:
        """The stored spans of ``trace_ids`` in the order they were written (one scan of
        the table; for the few exemplar traces a report draws). Unusable rows are left
        out, as in :meth:`iter_spans`."""
        ids = sorted(set(trace_ids))
        if not ids:
            return
        query = (
            f"SELECT {self._columns} FROM spans WHERE trace_id IN ({','.join('?' * len(ids))}) "
            "ORDER BY rowid"
        )
        with self._lock, self._reading():
            rows = self._conn.execute(query, ids).fetchall()
        events = self.events_of(ids)
        tally = Warnings()
        for row in rows:
            span = _span_of_row(row, tally, events)
            if span is not None:
                yield span


def _span_of_row(row: tuple, tally: Warnings, events: Events | None = None) -> Span | None:
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
