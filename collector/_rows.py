"""A span as a store row and back, and where stores are and how they are opened.

:func:`span_row` makes the row the writer is handed (its fields in column order,
attributes as JSON, its run last); :func:`group_rows` packs a batch of them into a row
per trace (:mod:`collector._schema`), and :func:`spans_of_group` reads one back as
:class:`~tracer.spans.model.Span` objects, decoded in one call and checked as spans
from files are; :func:`span_of_row` reads a row of a partition of a row per span.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import orjson

from collector._events import Events
from collector._schema import ROW_FIELDS
from tracer._errors import SourceError
from tracer.attributes import RUN
from tracer.spans._numbers import NUMERIC_KEYS, TIME_LIMIT_NS, checked, needs_check
from tracer.spans.events import with_events
from tracer.spans.model import Span, Warnings

__all__ = [
    "GROUP_BYTES",
    "GROUP_SHARE",
    "STORE_HEADER",
    "connect_read_only",
    "default_store_path",
    "group_rows",
    "is_store_file",
    "size_of",
    "span_of_row",
    "span_row",
    "spans_of_group",
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
    if not _ids_and_times(row[0], row[1], row[6], row[7], tally):
        return None
    try:
        attributes = orjson.loads(row[11])
    except (orjson.JSONDecodeError, TypeError):
        tally.skip("store rows whose attributes are not JSON were skipped")
        return None
    return _span_of(row, attributes, tally, events)


def _ids_and_times(trace_id: Any, span_id: Any, start: Any, end: Any, tally: Warnings) -> bool:
    """True when a span has ids and integer times, the end not before the start; else
    False, counted in ``tally``."""
    if not trace_id or not span_id or not isinstance(start, int) or not isinstance(end, int):
        tally.skip("store rows without ids or times were skipped")
        return False
    if end < start:
        tally.skip("store rows that end before they start were skipped")
        return False
    return True


def _span_of(
    fields: Sequence[Any], attributes: Any, tally: Warnings, events: Events | None
) -> Span | None:
    """:func:`span_of_row` of a span's ``fields`` (in column order; ids and times
    checked) with its ``attributes`` read."""
    if not isinstance(attributes, dict):
        tally.skip("store rows whose attributes are not a JSON object were skipped")
        return None
    span = Span(
        trace_id=fields[0],
        span_id=fields[1],
        parent_id=fields[2],
        service=fields[3],
        name=fields[4],
        kind=fields[5],
        start_ns=fields[6],
        end_ns=fields[7],
        stage=fields[8],
        status=fields[9],
        first_token_ns=fields[10],
        attributes=attributes,
        trace_state=fields[12] if isinstance(fields[12], str) and fields[12] else None,
    )
    return _finished(span, tally, events)


def _finished(span: Span, tally: Warnings, events: Events | None) -> Span | None:
    """``span`` with its stored ``events``, its numbers checked (:func:`checked`)."""
    if events:
        own = events.get((span.trace_id, span.span_id))
        if own is not None:
            span = with_events(span, own)
    return span if not needs_check(span) else checked(span, tally)


#: A span in a group's body: its fields in the order of :class:`Span`.
_SPAN_FIELDS = 13
#: The most bytes of spans a group holds, as a share of the store's page: SQLite keeps
#: a row within one page when it fits, and a row of more than half a page would leave
#: the rest of it empty (whole traces of 2 KiB on pages of 4 KiB took 47% more disk).
GROUP_SHARE = 3 / 8
#: The same on pages of 4 KiB.
GROUP_BYTES = int(4096 * GROUP_SHARE)
_encode = msgspec.json.Encoder().encode
_decode_group = msgspec.json.Decoder(list[Span]).decode


def group_rows(rows: Sequence[tuple], most_bytes: int = GROUP_BYTES) -> list[tuple]:
    """The rows of a packed partition (:mod:`collector._schema`) for span ``rows`` made
    by :func:`span_row`: a row per trace (a trace whose spans name two runs: a row per
    run; one whose spans take more than ``most_bytes``: a row per so many bytes), in the
    order of each trace's first span, its spans in the order given. A span's trace id is
    its row's, not written again in the body.

    Raises:
        sqlite3.ProgrammingError: a row is not a span row (nothing is packed).
    """
    groups: dict[str, list[Any]] = {}
    out: list[list[Any]] = []
    raw, encode = msgspec.Raw, _encode
    for row in rows:
        if len(row) != ROW_FIELDS:
            raise sqlite3.ProgrammingError(
                f"a span row has {ROW_FIELDS} fields, this one {len(row)}"
            )
        trace_id, start, run = row[0], row[6], row[13]
        piece = encode(("", *row[1:11], raw(row[11]), row[12] or None))
        group = groups.get(trace_id)
        if (
            group is None
            or (run is not None and group[3] is not None and group[3] != run)
            or group[5] + len(piece) > most_bytes
        ):
            group = groups[trace_id] = [trace_id, start, start, run, [piece], len(piece) + 2]
            out.append(group)
            continue
        if start < group[1]:
            group[1] = start
        elif start > group[2]:
            group[2] = start
        if group[3] is None:
            group[3] = run
        group[4].append(piece)
        group[5] += len(piece) + 1
    return [
        (tid, first, last, run, len(pieces), b"[" + b",".join(pieces) + b"]")
        for tid, first, last, run, pieces, _ in out
    ]


def spans_of_group(
    trace_id: str, body: bytes, count: object, tally: Warnings, events: Events | None = None
) -> list[Span]:
    """The spans of a stored group (of ``count`` spans) of the trace ``trace_id``, with
    their stored ``events`` (as :func:`span_of_row`): decoded in one call and checked in
    one pass; a group that does not decode as spans is read span by span as
    :func:`span_of_row` reads rows, one that is not JSON skipped (counted in ``tally``)."""
    try:
        spans = _decode_group(body)
    except (msgspec.DecodeError, TypeError):
        return _lenient(trace_id, body, count, tally, events)
    if events or not trace_id:
        return _checked(trace_id, spans, tally, events)
    limit, plain = TIME_LIMIT_NS, NUMERIC_KEYS.isdisjoint
    for s in spans:
        s.trace_id = trace_id
        first = s.first_token_ns
        if not (
            s.span_id
            and 0 <= s.start_ns <= s.end_ns < limit
            and (first is None or 0 <= first < limit)
            and plain(s.attributes)
            and s.trace_state != ""
        ):
            return _checked(trace_id, spans, tally, events)
    return spans


def _checked(
    trace_id: str, spans: list[Span], tally: Warnings, events: Events | None
) -> list[Span]:
    """The decoded ``spans`` of a group of ``trace_id`` checked one by one, as
    :func:`span_of_row` checks rows (their trace id set)."""
    out = []
    for span in spans:
        span.trace_id = trace_id
        if not _ids_and_times(span.trace_id, span.span_id, span.start_ns, span.end_ns, tally):
            continue
        kept = _settled(span, tally, events)
        if kept is not None:
            out.append(kept)
    return out


def _settled(span: Span, tally: Warnings, events: Events | None) -> Span | None:
    """A decoded span of a group as :func:`_finished` keeps it, an empty trace state
    read as none."""
    if span.trace_state == "":
        span.trace_state = None
    return _finished(span, tally, events)


def _lenient(
    trace_id: str, body: object, count: object, tally: Warnings, events: Events | None
) -> list[Span]:
    """:func:`spans_of_group` of a group that does not decode as spans: each span that
    does is kept, checked as :func:`span_of_row` checks rows; the others are counted."""
    try:
        items = orjson.loads(body)  # type: ignore[arg-type]
    except (orjson.JSONDecodeError, TypeError):
        items = None
    if not isinstance(items, list):
        lost = count if isinstance(count, int) and count > 0 else 1
        tally.skip("store rows whose spans are not JSON were skipped", lost)
        return []
    out = []
    for item in items:
        if not isinstance(item, list) or len(item) != _SPAN_FIELDS:
            tally.skip("store rows that are not spans were skipped")
            continue
        item[0] = trace_id
        if not _ids_and_times(item[0], item[1], item[6], item[7], tally):
            continue
        if not isinstance(item[11], dict):
            tally.skip("store rows whose attributes are not a JSON object were skipped")
            continue
        try:
            span = msgspec.convert(item, Span)
        except msgspec.ValidationError:
            tally.skip("store rows with a field of the wrong type were skipped")
            continue
        kept = _settled(span, tally, events)
        if kept is not None:
            out.append(kept)
    return out


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
