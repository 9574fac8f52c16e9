"""``POST /v1/logs``: OTLP log records kept as the events of their spans.

GenAI instrumentations now emit their events (the first chunk, the usage of a call)
as OTLP log records that carry the trace id and span id of their span, instead of
span events. The receiver takes them like traces (protobuf or JSON, gzip, the same
limits, token, memory budget and answers) and stores each record that belongs to a
span as an event of that span (:func:`collector.store.event_row`); the analysis reads
it as the span event of the same name (:mod:`tracer.spans.events`), so either form
gives the same answer.

What is not kept, and answered as rejected in OTLP partial success
(``rejectedLogRecords``) with the reason:

- records without a trace id and span id (plain application logs: hoptrace keeps
  spans, not logs), and records without an event name (OTLP ``eventName``, or the
  ``event.name`` attribute); /healthz counts them in ``log_records_without_span``;
- records that cannot be stored: ids that are not 16 and 8 bytes (hex in JSON),
  a time outside 1970..2200, attribute values nested too deep or integers past 64
  bits (as for spans, :mod:`collector.validate`).

A record's body is never stored, and prompt and completion attributes are dropped as
from spans unless the collector keeps content.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from google.protobuf import unknown_fields
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)

from collector.decode import Decoded, RequestError, gunzip
from collector.store import event_row
from collector.validate import Rejections, attributes_problem, json_id_problem
from tracer.attributes import is_content_key
from tracer.spans.logs import (
    LogEvent,
    LogTally,
    log_events_from_otlp_json,
    log_events_from_otlp_proto,
)

__all__ = ["LOGS_PATH", "decode_logs_body", "logs_reply"]

#: Where OTLP/HTTP sends logs.
LOGS_PATH = "/v1/logs"
_UNIT = "log record"
_NOT_KEPT = (
    "log records without a trace and span id or an event name are not kept (hoptrace "
    "keeps the events of spans)"
)


def decode_logs_body(
    box: list[bytes],
    *,
    is_json: bool,
    gzipped: bool,
    max_body_bytes: int,
    keep_content: bool,
    grow: Callable[[int], bool] | None = None,
) -> tuple[Decoded, int]:
    """The event rows of one ``/v1/logs`` body, and how many records had no span.

    Arguments as :func:`collector.decode.decode_body`; the rejections count log
    records.

    Raises:
        RequestError: the body as a whole is not an OTLP logs request (4xx), or no
            memory (503).
    """
    body = box.pop()
    if gzipped:
        body = gunzip(body, max_body_bytes)
        if grow is not None and not grow(len(body)):
            raise RequestError(503, "the collector is at its memory limit", retry_after_s=1)
    rejections = Rejections(_UNIT)
    tally = LogTally()
    if is_json:
        obj = _json(body)
        del body
        records = _checked_json(obj, rejections)
        events = list(log_events_from_otlp_json({"resourceLogs": records}, tally))
    else:
        request = _proto(body)
        del body
        events = list(log_events_from_otlp_proto(request, tally))
    total = len(events) + tally.dropped + rejections.count
    rows = []
    dropped = 0
    for event in events:
        if not keep_content:
            dropped += _drop_content(event)
        problem = attributes_problem(event.attributes)
        if problem is not None:
            rejections.add(*problem)
            continue
        try:
            rows.append(event_row(event))
        except (TypeError, ValueError) as exc:
            rejections.add("its attributes cannot be stored as JSON", str(exc))
    rejections.add(_NOT_KEPT, None, tally.without_span + tally.without_name)
    rejections.add(
        "its ids are not 16 and 8 bytes, or its time is outside 1970..2200", None, tally.bad
    )
    return Decoded(rows, total, rejections, dropped), tally.without_span + tally.without_name


def logs_reply(is_json: bool, rejections: Rejections) -> tuple[str, bytes]:
    """The content type and body of the answer to a stored ``/v1/logs`` request."""
    rejected = rejections.count
    message = rejections.message() if rejected else ""
    if is_json:
        reply: dict[str, Any] = {}
        if rejected:
            reply["partialSuccess"] = {
                "rejectedLogRecords": str(rejected),
                "errorMessage": message,
            }
        return "application/json", orjson.dumps(reply)
    response = ExportLogsServiceResponse()
    if rejected:
        response.partial_success.rejected_log_records = rejected
        response.partial_success.error_message = message
    return "application/x-protobuf", response.SerializeToString()


def _drop_content(event: LogEvent) -> int:
    content = [k for k in event.attributes if is_content_key(k)]
    for key in content:
        del event.attributes[key]
    return len(content)


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if "UTF-8" not in str(exc):
            raise RequestError(400, f"body is not valid JSON ({exc})") from exc
    # A string that is not UTF-8 costs its record: marked, then found below.
    text = body.decode("utf-8", errors="hoptrace-not-utf8")
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as again:
        raise RequestError(400, f"body is not valid JSON ({again})") from again


#: What ``collector.decode``'s error handler puts where a body's bytes are not UTF-8.
_MARK = "\ufdd0".encode()


def _checked_json(obj: Any, rejections: Rejections) -> list[dict[str, Any]]:
    """The resourceLogs entries with the records that pass the id checks."""
    if not isinstance(obj, dict) or not isinstance(obj.get("resourceLogs"), list):
        raise RequestError(
            400, 'JSON body is not an OTLP logs export request: expected {"resourceLogs": [...]}'
        )
    kept = []
    for rl in obj["resourceLogs"]:
        scopes = rl.get("scopeLogs") if type(rl) is dict else None
        good_scopes = []
        for sl in scopes if type(scopes) is list else ():
            records = sl.get("logRecords") if type(sl) is dict else None
            good = []
            for raw in records if type(records) is list else ():
                if type(raw) is not dict:
                    rejections.add("a log record is not an object", raw)
                    continue
                problem = None
                for key, n_bytes, what in (("traceId", 16, "trace id"), ("spanId", 8, "span id")):
                    value = raw.get(key)
                    if value not in (None, ""):
                        problem = problem or json_id_problem(value, n_bytes, what)
                if problem is not None:
                    rejections.add(problem, raw.get("traceId") or raw.get("spanId"))
                    continue
                if _MARK in orjson.dumps(raw):
                    rejections.add("the log record holds a string that is not valid UTF-8")
                    continue
                good.append(raw)
            if good:
                good_scopes.append({"logRecords": good})
        if good_scopes:
            kept.append({"scopeLogs": good_scopes})
    return kept


def _proto(body: bytes) -> ExportLogsServiceRequest:
    try:
        request = ExportLogsServiceRequest.FromString(body)
    except DecodeError as exc:
        raise RequestError(400, f"body is not a valid OTLP protobuf message ({exc})") from exc
    if len(unknown_fields.UnknownFieldSet(request)):
        raise RequestError(400, "body is not an OTLP ExportLogsServiceRequest")
    return request
