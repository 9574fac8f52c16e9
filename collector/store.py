"""The span store: SQLite in WAL mode, one writer and any number of readers.

The receiver writes batches with :meth:`SpanStore.write`; the analyzer, in this or
another process, reads spans back as :class:`tracer.spans.model.Span` while ingest
goes on. A span already written through this store object (the most recent
``recent_keys`` of them; retries and re-sent batches land there) is not written again,
and the analyzer keeps one span per (trace id, span id) on reading. The table has no
unique index on purpose: random trace ids make every batch dirty hundreds of index
pages, which cut ingest fivefold.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

import orjson

from tracer._errors import SourceError
from tracer.spans.model import Span, Warnings

__all__ = ["SpanStore", "default_store_path"]

_SCHEMA = """
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
    attributes BLOB NOT NULL
);
"""
_COLUMNS = (
    "trace_id, span_id, parent_id, service, name, kind, start_ns, end_ns, stage, status, "
    "first_token_ns, attributes"
)


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


class SpanStore:
    """A span store at ``path`` (created when ``create`` is true).

    Args:
        path: the SQLite file.
        create: create the file and schema if missing; else a missing file raises.
        synchronous: SQLite ``synchronous`` pragma: ``NORMAL`` (default; a committed
            batch survives a crash of the process) or ``FULL`` (survives power loss).

    Raises:
        SourceError: the file is missing (and ``create`` is false) or not a store.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        create: bool = False,
        synchronous: str = "NORMAL",
        recent_keys: int = 500_000,
    ):
        self.path = Path(path)
        self._recent: dict[tuple[str, str], None] = {}
        self._recent_max = recent_keys
        if not create and not self.path.exists():
            raise SourceError(
                f"no span store at {str(self.path)!r}; run 'hoptrace collect' (or "
                "'hoptrace demo') first, or pass a trace file"
            )
        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(f"PRAGMA synchronous={synchronous}")
            if create:
                self._conn.executescript(_SCHEMA)
            self._conn.execute("SELECT 1 FROM spans LIMIT 1").fetchall()
        except sqlite3.DatabaseError as exc:
            raise SourceError(f"{str(self.path)!r} is not a hoptrace span store ({exc})") from exc
        self._lock = threading.Lock()

    def write(self, spans: Iterable[Span]) -> int:
        """Store spans in one transaction; returns how many were new (not duplicates)."""
        fresh = []
        recent = self._recent
        for s in spans:
            key = (s.trace_id, s.span_id)
            if key in recent:
                continue
            recent[key] = None
            fresh.append(s)
        while len(recent) > self._recent_max:
            del recent[next(iter(recent))]
        rows = [
            (
                s.trace_id,
                s.span_id,
                s.parent_id,
                s.service,
                s.name,
                s.kind,
                s.start_ns,
                s.end_ns,
                s.stage,
                s.status,
                s.first_token_ns,
                orjson.dumps(s.attributes, default=str),
            )
            for s in fresh
        ]
        return self.write_rows(rows)

    def write_rows(self, rows: list[tuple]) -> int:
        """Store prepared rows (see :meth:`write`) in one transaction."""
        with self._lock:
            before = self._conn.total_changes
            with self._conn:
                self._conn.executemany(
                    f"INSERT OR IGNORE INTO spans ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    rows,
                )
            return self._conn.total_changes - before

    def count(self) -> int:
        """Number of stored spans."""
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM spans").fetchone()[0])

    def iter_spans(
        self, since_ns: int | None = None, warnings: Warnings | None = None
    ) -> Iterator[Span]:
        """Every stored span (of traces that started at or after ``since_ns``).

        Rows are checked as file spans are: a row whose attributes are not JSON, whose
        ids are empty or whose end is before its start is skipped and counted in
        ``warnings``, not raised.
        """
        query = f"SELECT {_COLUMNS} FROM spans"
        params: tuple = ()
        if since_ns is not None:
            query += (
                " WHERE trace_id IN (SELECT trace_id FROM spans GROUP BY trace_id "
                "HAVING MIN(start_ns) >= ?)"
            )
            params = (since_ns,)
        with self._lock:
            rows = self._conn.execute(query, params).fetchall()
        tally = warnings if warnings is not None else Warnings()
        for row in rows:
            if (
                not row[0]
                or not row[1]
                or not isinstance(row[6], int)
                or not isinstance(row[7], int)
            ):
                tally.skip("store rows without ids or times were skipped")
                continue
            if row[7] < row[6]:
                tally.skip("store rows that end before they start were skipped")
                continue
            try:
                attributes = orjson.loads(row[11])
            except (orjson.JSONDecodeError, TypeError):
                tally.skip("store rows whose attributes are not JSON were skipped")
                continue
            if not isinstance(attributes, dict):
                tally.skip("store rows whose attributes are not a JSON object were skipped")
                continue
            yield Span(
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
            )

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SpanStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
