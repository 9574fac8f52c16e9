"""OTLP log records -> the events of the spans they belong to.

A log record belongs to a span when it carries the span's trace id and span id; its
event name is OTLP's ``eventName`` field, else its ``event.name`` attribute; its time
is ``timeUnixNano``, else ``observedTimeUnixNano``. Its body is never read (it holds
message content, which latency analysis does not need). What the analysis takes from
an event is in :mod:`tracer.spans.events`.

Log records without a span (no ids), without an event name, or with ids that cannot be
read are counted in :class:`LogTally` and not kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from tracer import attributes as attrs
from tracer.spans._numbers import TIME_LIMIT_NS
from tracer.spans.otlp import _attr_dict, _proto_value, normalize_id

__all__ = ["LogEvent", "LogTally", "log_events_from_otlp_json", "log_events_from_otlp_proto"]


class LogEvent(msgspec.Struct, gc=False):
    """One log record as an event of its span."""

    trace_id: str
    span_id: str
    name: str
    time_ns: int
    attributes: dict[str, Any] = {}


@dataclass
class LogTally:
    """Log records that were not kept, by reason."""

    without_span: int = 0
    without_name: int = 0
    bad: int = 0

    @property
    def dropped(self) -> int:
        """All records not kept."""
        return self.without_span + self.without_name + self.bad


def _time(raw: dict[str, Any]) -> int:
    for key in ("timeUnixNano", "observedTimeUnixNano"):
        try:
            value = int(raw.get(key) or 0)
        except (TypeError, ValueError, OverflowError):
            value = 0
        if value:
            return value
    return 0


def _event(
    trace_raw: Any,
    span_raw: Any,
    name: Any,
    time_ns: int,
    attributes: dict[str, Any],
    tally: LogTally,
) -> LogEvent | None:
    if not trace_raw or not span_raw:
        tally.without_span += 1
        return None
    if isinstance(trace_raw, bytes) and (len(trace_raw) != 16 or len(span_raw) != 8):
        tally.bad += 1
        return None
    trace_id, span_id = normalize_id(trace_raw, 32), normalize_id(span_raw, 16)
    if trace_id is None or span_id is None:
        tally.bad += 1
        return None
    if not name:
        name = attributes.get(attrs.EVENT_NAME)
    if not isinstance(name, str) or not name:
        tally.without_name += 1
        return None
    if not 0 <= time_ns < TIME_LIMIT_NS:
        tally.bad += 1
        return None
    return LogEvent(trace_id, span_id, name, time_ns, attributes)


def log_events_from_otlp_json(obj: Any, tally: LogTally) -> Iterator[LogEvent]:
    """The span events of one OTLP JSON ``{"resourceLogs": [...]}`` object."""
    resource_logs = obj.get("resourceLogs") if isinstance(obj, dict) else None
    for rl in resource_logs if isinstance(resource_logs, list) else ():
        scopes = rl.get("scopeLogs") if isinstance(rl, dict) else None
        for sl in scopes if isinstance(scopes, list) else ():
            records = sl.get("logRecords") if isinstance(sl, dict) else None
            for raw in records if isinstance(records, list) else ():
                if not isinstance(raw, dict):
                    tally.bad += 1
                    continue
                event = _event(
                    raw.get("traceId"),
                    raw.get("spanId"),
                    raw.get("eventName"),
                    _time(raw),
                    _attr_dict(raw.get("attributes")),
                    tally,
                )
                if event is not None:
                    yield event


def log_events_from_otlp_proto(request: Any, tally: LogTally) -> Iterator[LogEvent]:
    """The span events of an ``ExportLogsServiceRequest`` (or ``LogsData``) message."""
    for rl in request.resource_logs:
        for sl in rl.scope_logs:
            for raw in sl.log_records:
                event = _event(
                    raw.trace_id,
                    raw.span_id,
                    raw.event_name,
                    raw.time_unix_nano or raw.observed_time_unix_nano,
                    {kv.key: _proto_value(kv.value) for kv in raw.attributes},
                    tally,
                )
                if event is not None:
                    yield event
