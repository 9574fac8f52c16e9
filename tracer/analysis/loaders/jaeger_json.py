"""Jaeger v1 JSON (query API / UI download) -> :class:`Span`.

Times are microseconds; the parent comes from ``references`` (CHILD_OF, else
FOLLOWS_FROM) or the legacy ``parentSpanID``; the kind from the ``span.kind`` tag;
the service from ``processID`` -> ``processes``. The api/v3 form
(``{"result": <OTLP JSON>}``) is OTLP JSON and is read by the OTLP loader.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tracer import attributes as attrs
from tracer.spans.model import Span, Warnings, kind_from_name
from tracer.spans.otlp import first_token_ns, normalize_id

__all__ = ["spans_from_jaeger_trace"]


def _tags(items: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(items, list):
        for tag in items:
            if isinstance(tag, dict) and "key" in tag:
                out[str(tag["key"])] = tag.get("value")
    return out


def spans_from_jaeger_trace(trace: Any, warnings: Warnings) -> Iterator[Span]:
    """Spans of one Jaeger v1 trace object ``{"traceID", "spans", "processes"}``."""
    if not isinstance(trace, dict) or not isinstance(trace.get("spans"), list):
        warnings.skip("a Jaeger trace without a spans list was skipped", 0)
        warnings.skipped_traces += 1
        return
    raw_processes = trace.get("processes")
    processes: dict[str, Any] = raw_processes if isinstance(raw_processes, dict) else {}
    for raw in trace["spans"]:
        span = _span(raw, trace, processes, warnings)
        if span is not None:
            yield span


def _span(
    raw: Any, trace: dict[str, Any], processes: dict[str, Any], warnings: Warnings
) -> Span | None:
    if not isinstance(raw, dict):
        warnings.skip("a Jaeger span that is not an object was skipped")
        return None
    trace_id = normalize_id(raw.get("traceID") or trace.get("traceID"), 32)
    span_id = normalize_id(raw.get("spanID"), 16)
    if trace_id is None or span_id is None:
        warnings.skip("spans without a trace id or span id were skipped")
        return None
    try:
        start_us = int(raw["startTime"])
        duration_us = int(raw.get("duration", 0))
    except (KeyError, TypeError, ValueError, OverflowError):
        warnings.skip("spans with unreadable startTime or duration were skipped")
        return None
    if start_us <= 0 or duration_us < 0:
        warnings.skip("spans with a missing start or a negative duration were skipped")
        return None
    parent = None
    refs = raw.get("references")
    if isinstance(refs, list):
        for wanted in ("CHILD_OF", "FOLLOWS_FROM"):
            for ref in refs:
                if isinstance(ref, dict) and ref.get("refType") == wanted:
                    parent = normalize_id(ref.get("spanID"), 16)
                    break
            if parent:
                break
    if parent is None and raw.get("parentSpanID"):
        parent = normalize_id(raw.get("parentSpanID"), 16)
    tags = _tags(raw.get("tags"))
    process = raw.get("process")
    if not isinstance(process, dict):
        process = processes.get(str(raw.get("processID")), {}) if processes else {}
    service = (
        str(process.get("serviceName") or "unknown_service")
        if isinstance(process, dict)
        else "unknown_service"
    )
    start_ns = start_us * 1000
    events = []
    logs = raw.get("logs")
    if isinstance(logs, list):
        for log in logs:
            if isinstance(log, dict):
                fields = _tags(log.get("fields"))
                try:
                    events.append((fields.get("event"), int(log.get("timestamp", 0)) * 1000))
                except (TypeError, ValueError, OverflowError):
                    continue
    status = 0
    if (
        tags.get("error") in (True, "true")
        or str(tags.get("otel.status_code", "")).upper() == "ERROR"
    ):
        status = 2
    elif str(tags.get("otel.status_code", "")).upper() == "OK":
        status = 1
    stage = tags.get(attrs.STAGE)
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent,
        service=service,
        name=str(raw.get("operationName") or ""),
        kind=kind_from_name(tags.get(attrs.JAEGER_SPAN_KIND, 0)),
        start_ns=start_ns,
        end_ns=start_ns + duration_us * 1000,
        stage=str(stage) if stage is not None else None,
        status=status,
        first_token_ns=first_token_ns(start_ns, events, tags),
        attributes=tags,
        trace_state=_trace_state(tags.get(attrs.JAEGER_TRACE_STATE)),
    )


def _trace_state(value: object) -> str | None:
    return value if value and isinstance(value, str) else None
