"""The span store: SQLite in WAL mode, one writer and any number of readers.

The receiver writes batches with :meth:`SpanStore.write_rows` (rows made by
:func:`span_row`, off the writer's thread); :meth:`SpanStore.write` does both for a
list of spans. The analyzer, in this or another process, reads spans back as
:class:`tracer.spans.model.Span` while ingest goes on.

A span already committed through this store object (one of the most recent
``recent_keys // 2`` to ``recent_keys``; retries and re-sent batches land there) is not
written again, and the analyzer keeps one span per (trace id, span id) on reading. The
recent keys are two generations of sets, so a write costs the same per span however
many spans are stored and however large the group commit (no unique index: random
trace ids dirty a page per span in every commit).

Spans are kept in time partitions (:mod:`collector.partitions`), packed by trace (a
row per trace and batch, its spans one JSON array: :mod:`collector._schema`), indexed
by trace id once closed and dropped whole, oldest first, by retention
(:mod:`collector.retention`, applied by :meth:`SpanStore.maintain`). A read takes one
snapshot and merges the partitions' indexes in trace-id order (:mod:`collector._read`),
holding a chunk of rows and one trace, whatever the store's size.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import chain, islice
from pathlib import Path

from collector._events import (
    EVENT_ROW_FIELDS,
    EVENTS_SCHEMA,
    INSERT_EVENT,
    Events,
    event_row,
    read_events,
)
from collector._read import (
    PIECE_FIELDS,
    matching_trace_ids,
    pieces_in_trace_order,
    snapshot,
    started_after,
    trace_id_sample,
    wanted,
)
from collector._recent import RecentKeys
from collector._rows import (
    GROUP_SHARE,
    STORE_HEADER,
    connect_read_only,
    default_store_path,
    group_rows,
    is_store_file,
    size_of,
    span_of_row,
    span_row,
    spans_of_group,
    unreadable,
)
from collector._schema import GROUP, GROUP_COLUMNS, GROUP_FIELDS, PACKED, is_packed, read_columns
from collector.partitions import (
    Partition,
    create_partition,
    drop_partition,
    has_catalog,
    is_legacy,
    list_partitions,
    migrate,
    record_rows,
    seal,
)
from collector.retention import Retention, RetentionCounts
from tracer._errors import SourceError
from tracer.spans.model import Span, Warnings

__all__ = [
    "EVENT_ROW_FIELDS",
    "PAGE_BYTES",
    "STORE_HEADER",
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
#: Rows read at a time (a row of a packed partition holds a trace's spans of one batch).
_CHUNK = 4_000
#: The write-ahead log is truncated to 1 MiB after a checkpoint.
#: Freed pages zeroed only where it costs no extra write (docs/collector.md).
_FREED = "secure_delete=FAST"
_WAL_LIMIT = "journal_size_limit=1048576"
#: Bytes of log between checkpoints (SQLite's default: 1,000 pages of 4 KiB).
_CHECKPOINT_BYTES = 4 * 1024 * 1024
#: The page size of a new store. A group of spans (:mod:`collector._schema`) of about
#: a kilobyte leaves about half of one unused at the end of each page it fills: on
#: pages of 4 KiB that took a quarter more disk than a row per span, on 16 KiB pages
#: none more while the partition is written, 14% less once it has its index by trace.
PAGE_BYTES = 16384


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
        retention: how long and how much it keeps (:mod:`collector.retention`), applied
            by :meth:`maintain`; None keeps everything.

    A store made before partitions is read as it is; opened for writing it is migrated
    once (:func:`collector.partitions.migrate`), and :attr:`migration` says so in one
    line. A quick check on opening reads the pages every write goes through; a store
    that is damaged elsewhere raises :class:`SourceError` when that part is read.
    Opened for writing, a store that cannot be written raises at once.

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
        retention: Retention | None = None,
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
        self.retention = retention or Retention()
        self.removed = RetentionCounts()
        #: One line when opening migrated a store made by an earlier version.
        self.migration: str | None = None
        self._current: Partition | None = None
        self._current_base_bytes = 0
        self._seen: tuple[int, int | None, int] = (0, None, 0)
        try:
            if read_only:
                self._conn = connect_read_only(self.path)
            else:
                self._conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
                if create:  # a new file only: the pages of a store cannot change size in WAL
                    self._conn.execute(f"PRAGMA page_size={PAGE_BYTES}")
                # The log is cut back to its limit after a checkpoint, not left at its peak.
                # Freed pages are not zeroed (some builds zero them, Debian's among them):
                # zeroing a dropped partition wrote all its pages again, with the writer
                # waiting; they are overwritten by the spans that come next instead.
                pragmas = ("journal_mode=WAL", f"synchronous={synchronous}", _WAL_LIMIT, _FREED)
                for pragma in pragmas:
                    self._conn.execute(f"PRAGMA {pragma}")
                if create:
                    self._conn.executescript(EVENTS_SCHEMA)
                if create or is_legacy(self._conn):
                    self.migration = migrate(self._conn)
            self._conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
            partitions = list_partitions(self._conn)
            if not partitions and not has_catalog(self._conn):
                raise sqlite3.DatabaseError("no spans table")
            self._columns = {
                p.name: read_columns(self._conn, p.name, read_only) for p in partitions
            }
        except sqlite3.DatabaseError as exc:
            raise SourceError(f"{str(self.path)!r} is not a hoptrace span store ({exc})") from exc
        try:
            # A cheap look at the pages every write goes through (the rightmost path of
            # the newest table), instead of a full integrity check that reads the file.
            if partitions:
                self._conn.execute(f"SELECT MAX(rowid) FROM {partitions[-1].name}").fetchone()
            if not read_only:
                # A store from before events were kept gets their table too.
                self._conn.executescript(EVENTS_SCHEMA)
                self._probe_write()
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise self._unreadable(exc) from exc
        variables = self._conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        self._rows_per_statement = max(1, min(_ROWS_PER_STATEMENT, variables // GROUP_FIELDS))
        page = self._conn.execute("PRAGMA page_size").fetchone()[0]
        self._group_bytes = int(page * GROUP_SHARE)
        if not read_only:  # the log checkpointed every 4 MiB, whatever the page size
            self._conn.execute(f"PRAGMA wal_autocheckpoint={max(1, _CHECKPOINT_BYTES // page)}")
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
        return unreadable(self.path, exc)

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

    def _partition(self, now_ns: int | None = None) -> Partition:
        """The partition being written (started at the first write)."""
        if self._current is None:
            self._current = create_partition(self._conn, now_ns)
            self._columns[self._current.name] = PACKED
            self._current_base_bytes = self.used_bytes()
        return self._current

    def write_rows(self, rows: list[tuple]) -> int:
        """Store rows made by :func:`span_row` (and :func:`event_row`, told by their
        length) in one transaction, the spans packed by trace
        (:func:`collector._rows.group_rows`); returns how many were new.

        A row whose (trace id, span id) this store committed recently, or that comes
        twice in ``rows``, is written once. Keys are remembered only after the commit,
        so a batch that failed is written in full when it is sent again.

        Raises:
            sqlite3.ProgrammingError: a row is neither a span's nor an event's (nothing
                is written).
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
            groups = group_rows(fresh, self._group_bytes)
            part = self._partition()
            insert = f"INSERT INTO {part.name} ({GROUP_COLUMNS}) VALUES "
            per = self._rows_per_statement
            whole = len(groups) - len(groups) % per
            with self._conn:
                if whole:
                    self._conn.executemany(
                        insert + ",".join([GROUP] * per),
                        (
                            tuple(chain.from_iterable(groups[i : i + per]))
                            for i in range(0, whole, per)
                        ),
                    )
                if whole < len(groups):
                    self._conn.executemany(insert + GROUP, groups[whole:])
                if fresh:
                    starts = [row[6] for row in fresh]
                    record_rows(self._conn, part, len(fresh), min(starts), max(starts))
                if events:
                    self._conn.executemany(INSERT_EVENT, events)
            recent.update(batch)
            return len(fresh) + len(events)

    def used_bytes(self) -> int:
        """Bytes of the store's pages in use (its file less the pages free for reuse)."""
        pages = self._conn.execute("PRAGMA page_count").fetchone()[0]
        free = self._conn.execute("PRAGMA freelist_count").fetchone()[0]
        size = self._conn.execute("PRAGMA page_size").fetchone()[0]
        return int((pages - free) * size)

    def maintain(self, now_ns: int | None = None) -> None:
        """Start the next partition when the current one is full, and drop what the
        retention says is old (whole partitions, whole traces; see
        :mod:`collector.retention`). The writer calls it between commits.

        Raises:
            sqlite3.Error: the store could not be changed (it stays as it was).
        """
        now = time.time_ns() if now_ns is None else now_ns
        with self._lock:
            if self._current is None:
                return
            retention = self.retention
            used = self.used_bytes()
            if (
                now - self._current.created_ns >= retention.partition_s * 1e9
                or used - self._current_base_bytes >= retention.partition_bytes
            ):
                self._current = None
                self._partition(now)
            for closed in list_partitions(self._conn)[:-1]:
                if not closed.indexed:
                    started = time.perf_counter()
                    seal(self._conn, closed)
                    self.removed.slowest_seal_s = max(
                        self.removed.slowest_seal_s, time.perf_counter() - started
                    )
            while True:
                partitions = list_partitions(self._conn)
                oldest = retention.expired(partitions, now, self.used_bytes())
                if oldest is None:
                    return
                started = time.perf_counter()
                before = self.used_bytes()
                spans, stragglers = drop_partition(self._conn, oldest, partitions[1:])
                took = time.perf_counter() - started
                # Freed pages are reused: the current partition's growth counts from less.
                self._current_base_bytes -= before - self.used_bytes()
                self._columns.pop(oldest.name, None)
                removed = self.removed
                removed.spans_removed += spans + stragglers
                removed.partitions_removed += 1
                removed.last_removed_ns = now
                removed.slowest_removal_s = max(removed.slowest_removal_s, took)
                if oldest.number == partitions[-1].number:
                    return

    def store_bytes(self) -> int:
        """Bytes of the store on disk: its file and its write-ahead log."""
        return size_of(self.path) + size_of(Path(str(self.path) + "-wal"))

    def health(self) -> dict[str, object]:
        """The store's size, oldest span and what retention removed (for /healthz).

        It never waits for the writer (the event loop asks): while a commit or a purge
        holds the store, the partitions and pages in use are those seen last."""
        if self._lock.acquire(blocking=False):
            try:
                partitions = list_partitions(self._conn)
                starts = [p.first_start_ns for p in partitions if p.first_start_ns is not None]
                self._seen = (len(partitions), min(starts) if starts else None, self.used_bytes())
            except sqlite3.Error:  # closed, or busy: what it held last
                pass
            finally:
                self._lock.release()
        count, oldest, used = self._seen
        return {
            "store_bytes": self.store_bytes(),
            "store_file_bytes": size_of(self.path),
            "store_used_bytes": used,
            "store_partitions": count,
            "store_oldest_span_ns": oldest,
            "retention_max_age_s": self.retention.max_age_s,
            "retention_max_bytes": self.retention.max_bytes,
            "retention_spans_removed": self.removed.spans_removed,
            "retention_partitions_removed": self.removed.partitions_removed,
            "retention_last_removed_ns": self.removed.last_removed_ns,
            "retention_slowest_removal_s": round(self.removed.slowest_removal_s, 4),
            "store_slowest_index_s": round(self.removed.slowest_seal_s, 4),
        }

    def count(self) -> int:
        """Number of stored spans."""
        with self._lock, self._reading(), snapshot(self._conn) as partitions:
            columns = self._columns_of(partitions)
            return sum(
                int(
                    self._conn.execute(
                        f"SELECT COALESCE(SUM(spans), 0) FROM {p.name}"
                        if is_packed(columns[p.name])
                        else f"SELECT COUNT(*) FROM {p.name}"
                    ).fetchone()[0]
                )
                for p in partitions
            )

    def _columns_of(self, partitions: list[Partition]) -> dict[str, str]:
        for p in partitions:
            if p.name not in self._columns:
                self._columns[p.name] = read_columns(self._conn, p.name, self.read_only)
        return self._columns

    def _traces(
        self,
        since_ns: int | None,
        bounds: tuple[str | None, str | None],
        run: str | None,
        chunk: int,
        ids: list[str] | None = None,
    ) -> Iterator[list[tuple]]:
        """The pieces of each trace (:mod:`collector._read`), one trace at a time, in
        trace-id order (see :meth:`traces`), in one snapshot of the store."""
        lock, conn = self._lock, self._conn
        with lock, self._reading():
            context = snapshot(conn)
            partitions = context.__enter__()
        try:
            with lock, self._reading():
                keep, skipped = wanted(partitions, since_ns)
                columns = self._columns_of(keep)
                if run is not None and ids is None:
                    ids = matching_trace_ids(conn, keep, run)
                pieces = pieces_in_trace_order(conn, keep, columns, bounds, ids, chunk, since_ns)
            current: list[tuple] = []
            while True:
                done: list[list[tuple]] = []
                with lock, self._reading():
                    block = list(islice(pieces, chunk))
                    for piece in block:
                        if current and piece[0] != current[0][0]:
                            if started_after(conn, current, since_ns, skipped):
                                done.append(current)
                            current = []
                        current.append(piece)
                    if not block and current and started_after(conn, current, since_ns, skipped):
                        done.append(current)
                yield from done  # outside the lock: the caller may use the store meanwhile
                if not block:
                    break
        finally:
            with lock, self._reading():  # a damaged store may fail the end of a read too
                context.__exit__(None, None, None)

    def iter_spans(
        self, since_ns: int | None = None, warnings: Warnings | None = None
    ) -> Iterator[Span]:
        """Every stored span (of traces that started at or after ``since_ns``), a trace
        at a time, in trace-id order. Spans are checked as file spans are: a span whose
        attributes are not JSON, whose ids are empty or whose end is before its start
        is skipped and counted in ``warnings``, not raised."""
        for _, spans in self.traces(since_ns, warnings):
            yield from spans

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

    def traces(
        self,
        since_ns: int | None = None,
        warnings: Warnings | None = None,
        chunk: int = _CHUNK,
        trace_ids: tuple[str | None, str | None] = (None, None),
        run: str | None = None,
    ) -> Iterator[tuple[int, list[Span]]]:
        """``(seq, spans)`` of every stored trace in trace-id order, its spans in the
        order they were written (``seq``: where its first one is in the store), read
        ``chunk`` rows at a time through each partition's index, so a reader holds a
        chunk and one trace, not the store. Spans are checked as in :meth:`iter_spans`;
        a trace none of whose spans can be used is left out. ``trace_ids`` = (lo, hi)
        keeps the traces with ``lo <= trace_id < hi`` (None: no bound), so that
        separate readers can take separate parts of the store; ``since_ns`` the traces
        that started at or after it; ``run`` (a glob) those with a span of that run,
        found by the index by run (others may come too: the caller filters).
        """
        tally = warnings if warnings is not None else Warnings()
        lo, hi = trace_ids
        bounds = [c for c, v in (("trace_id >= ?", lo), ("trace_id < ?", hi)) if v is not None]
        events = self._events(
            " WHERE " + " AND ".join(bounds) if bounds else "",
            [v for v in (lo, hi) if v is not None],
        )
        for pieces in self._traces(since_ns, trace_ids, run, chunk):
            spans = _spans_of(pieces, tally, events)
            if spans:
                yield pieces[0][4], spans

    def iter_trace_rows(
        self,
        since_ns: int | None = None,
        warnings: Warnings | None = None,
        chunk: int = _CHUNK,
        trace_ids: tuple[str | None, str | None] = (None, None),
        run: str | None = None,
    ) -> Iterator[tuple[int, Span]]:
        """``(seq, span)`` of every stored span in trace-id order: the spans of
        :meth:`traces` one by one, each with its trace's ``seq``."""
        for seq, spans in self.traces(since_ns, warnings, chunk, trace_ids, run):
            for span in spans:
                yield seq, span

    def trace_id_sample(self, size: int) -> list[str]:
        """The trace ids of about ``size`` rows spread evenly over the store (by rowid
        in each partition), sorted: where to cut it into parts of about equal size,
        without a full scan."""
        with self._lock, self._reading(), snapshot(self._conn) as partitions:
            return trace_id_sample(self._conn, partitions, size)

    def spans_of(self, trace_ids: Iterable[str]) -> Iterator[Span]:
        """The stored spans of ``trace_ids``, trace by trace in the order they were
        written, found by each partition's index (for the few exemplar traces a
        report draws, or one trace by id). Unusable spans are left out, as in
        :meth:`iter_spans`."""
        ids = sorted(set(trace_ids))
        if not ids:
            return
        events = self.events_of(ids)
        tally = Warnings()
        for pieces in self._traces(None, (None, None), None, _CHUNK, ids):
            yield from _spans_of(pieces, tally, events)


def _spans_of(pieces: list[tuple], tally: Warnings, events: Events) -> list[Span]:
    """The usable spans of one trace's ``pieces`` (:mod:`collector._read`), in order."""
    if len(pieces) == 1 and len(pieces[0]) == PIECE_FIELDS:
        trace_id, _, count, body, _ = pieces[0]
        return spans_of_group(trace_id, body, count, tally, events)
    out: list[Span] = []
    for piece in pieces:
        if len(piece) == PIECE_FIELDS:
            out += spans_of_group(piece[0], piece[3], piece[2], tally, events)
        else:
            span = span_of_row(piece[PIECE_FIELDS:], tally, events)
            if span is not None:
                out.append(span)
    return out
