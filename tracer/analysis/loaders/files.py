"""Trace files: OTLP JSON (one object, or one per line), Jaeger v1 JSON and api/v3 JSON,
and Tempo's trace JSON (``{"batches": [...]}``, ``{"trace": {"resourceSpans": [...]}}``);
OTLP JSON logs (``{"resourceLogs": [...]}``, as the Collector's file exporter writes
them) give the events of the spans they belong to (:mod:`tracer.spans.events`).

The format is told from the content, not the name. A file that cannot be read fully
is not an error: what can be used is loaded, the rest is counted in the warnings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, BinaryIO

import orjson

from tracer._errors import SourceError
from tracer.analysis.loaders.jaeger_json import spans_from_jaeger_trace
from tracer.analysis.model.traceset import TraceSet
from tracer.spans._otlp_lines import traces_from_otlp_line
from tracer.spans.logs import LogTally, log_events_from_otlp_json
from tracer.spans.otlp import spans_from_otlp_json

__all__ = ["add_line", "add_object", "is_otlp_lines", "load_file", "load_stream"]


def add_object(obj: Any, traceset: TraceSet, origin: str) -> bool:
    """Add the spans of one parsed JSON value; False when its shape is unknown."""
    warnings = traceset.warnings
    if isinstance(obj, dict):
        if "resourceLogs" in obj:  # OTLP logs: the events of spans
            tally = LogTally()
            traceset.add_events(log_events_from_otlp_json(obj, tally))
            if tally.dropped:
                warnings.skip(
                    f"{origin}: {tally.dropped} log records without a trace and span id, "
                    "an event name or a usable time were not used",
                    0,
                )
            return True
        if "resourceSpans" in obj:
            traceset.add(spans_from_otlp_json(obj, warnings))
            return True
        if "result" in obj and isinstance(obj["result"], dict):
            traceset.add(spans_from_otlp_json(obj["result"], warnings))
            return True
        if isinstance(obj.get("batches"), list):  # Tempo's /api/traces/<id>
            traceset.add(spans_from_otlp_json({"resourceSpans": obj["batches"]}, warnings))
            return True
        if isinstance(obj.get("trace"), dict):  # Tempo's /api/v2/traces/<id>
            return add_object(obj["trace"], traceset, origin)
        if "data" in obj and isinstance(obj["data"], list):
            for trace in obj["data"]:
                traceset.add(spans_from_jaeger_trace(trace, warnings))
            if obj.get("errors"):
                warnings.note(
                    f"{origin}: the Jaeger response lists errors: {obj['errors']!r}"[:300]
                )
            return True
        if "spans" in obj and ("traceID" in obj or "processes" in obj):
            traceset.add(spans_from_jaeger_trace(obj, warnings))
            return True
    if isinstance(obj, list) and obj and all(isinstance(x, dict) for x in obj):
        return all(add_object(x, traceset, origin) for x in obj)
    return False


#: What :func:`add_line` made of a line.
LINE_GOOD, LINE_BLANK, LINE_UNKNOWN, LINE_BAD = range(4)


def add_line(line: bytes, traceset: TraceSet, origin: str) -> int:
    """Add the spans of one line of a JSON-lines file: :data:`LINE_GOOD`, or
    :data:`LINE_BLANK`, :data:`LINE_UNKNOWN` (JSON of an unknown shape) or
    :data:`LINE_BAD` (not JSON). OTLP lines take the typed fast path (others, Jaeger's
    for one, are not decoded twice: only a line with the key is tried)."""
    otlp = line.startswith(b'{"resourceSpans"') or b'"resourceSpans"' in line
    found = traces_from_otlp_line(line) if otlp else None
    if found is not None:
        traces = traceset.traces
        if not traces:
            traceset.traces = found
        else:
            for trace_id, spans in found.items():
                bucket = traces.get(trace_id)
                if bucket is None:
                    traces[trace_id] = spans
                else:
                    bucket.extend(spans)
        return LINE_GOOD
    if not line.strip():
        return LINE_BLANK
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return LINE_BAD
    return LINE_GOOD if add_object(obj, traceset, origin) else LINE_UNKNOWN


def is_otlp_lines(path: Path) -> bool:
    """True when the file at ``path`` is OTLP JSON lines: its first line is one OTLP
    traces object (as a Collector's file exporter writes), with no byte-order mark."""
    try:
        with open(path, "rb") as fh:
            first = fh.readline(64 * 1024 * 1024)
        if first.startswith((b"SQLi", b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf")):
            return False
        obj = orjson.loads(first)
    except (OSError, orjson.JSONDecodeError):
        return False
    return isinstance(obj, dict) and "resourceSpans" in obj


def _decode_text(data: bytes) -> bytes:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16").encode()
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:]
    return data


def load_file(path: Path, traceset: TraceSet) -> None:
    """Load one trace file into ``traceset``.

    Raises:
        SourceError: the file cannot be opened.
    """
    origin = str(path)
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise SourceError(f"cannot open {origin!r}: {exc.strerror or exc}") from exc
    with fh:
        load_stream(fh, traceset, origin)


def load_stream(fh: BinaryIO, traceset: TraceSet, origin: str) -> None:
    """Load trace JSON from an open binary stream (a file, a pipe, standard input)."""
    first = fh.readline()
    if first.startswith((b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf")):
        _load_document(_decode_text(first + fh.read()), traceset, origin)
        return
    # The first line as any other: an OTLP line takes the typed path, which holds a
    # long line's spans in about a third of the memory of orjson's objects.
    got = add_line(first, traceset, origin) if first.strip() else LINE_BLANK
    if got in (LINE_BLANK, LINE_BAD):
        # Not one JSON value per line: the whole file is one JSON document.
        _load_document(first + fh.read(), traceset, origin)
        return
    if got == LINE_UNKNOWN:
        traceset.warnings.skip(f"{origin}: line 1 is JSON of an unknown shape", 0)
    _load_lines(fh, traceset, origin)


def _load_document(data: bytes, traceset: TraceSet, origin: str) -> None:
    warnings = traceset.warnings
    if not data.strip():
        warnings.skip(f"{origin}: the file is empty", 0)
        return
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if not _load_lines(data.splitlines(), traceset, origin, quiet=True):
            warnings.skip(f"{origin}: {_not_json(data, exc)}", 0)
        return
    if not add_object(obj, traceset, origin):
        warnings.skip(f"{origin}: JSON of an unknown shape (neither OTLP nor Jaeger)", 0)


#: What hoptrace reads, for the line that says a file is none of it.
READS = (
    "hoptrace reads OTLP JSON (one object, or one per line), Jaeger JSON, a trace "
    "downloaded from Tempo, or a span store"
)


def _not_json(data: bytes, exc: Exception) -> str:
    """What a file that is not JSON looks like (binary, text, or JSON cut short), and
    what hoptrace reads when it is not JSON at all."""
    head = data[:4096]
    if b"\0" in head:
        return f"binary data, not JSON; {READS}"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 3:  # not a character cut by the 4 KiB boundary
            return f"binary data (not UTF-8 text), not JSON; {READS}"
        text = head[: e.start].decode("utf-8")
    first = text.lstrip()[:1]
    if first in ("{", "["):
        return f"not valid JSON ({exc}); is it truncated?"
    line = text.strip().splitlines()[0] if text.strip() else ""
    return f"text, not JSON (it starts {line[:40]!r}); {READS}"


def _load_lines(lines: Any, traceset: TraceSet, origin: str, quiet: bool = False) -> bool:
    warnings = traceset.warnings
    bad = unknown = 0
    good = False
    for line in lines:
        got = add_line(line, traceset, origin)
        if got == LINE_GOOD:
            good = True
        elif got == LINE_BAD:
            bad += 1
        elif got == LINE_UNKNOWN:
            unknown += 1
    if quiet and not good:
        return False
    if bad:
        warnings.skip(f"{origin}: {bad} lines are not JSON (truncated or not a trace file)", 0)
    if unknown:
        warnings.skip(f"{origin}: {unknown} lines are JSON of an unknown shape", 0)
    return good
