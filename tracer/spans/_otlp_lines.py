"""OTLP JSON lines decoded straight into typed structures (msgspec), for big files.

``msgspec`` decodes a line of OTLP JSON (one ``{"resourceSpans": [...]}`` object, as
the Collector's file exporter writes it) into the few fields the analysis reads and
skips the rest (links, scopes, dropped counts, event attributes) without building
them: about a third of ``json.loads``'s time for the same line, and no dicts to
look fields up in afterwards.

It is the fast path only. A line it cannot take exactly as the general path would
(another shape, a field of an unexpected type, a span the general path would check
more carefully: an odd id, a missing time) gives None, and the caller parses the
line the general way (``orjson`` and :func:`~tracer.spans.otlp.spans_from_otlp_json`),
which gives the same spans or says why not. So the two paths agree span for span
(``tests/analysis/test_otlp_lines.py`` checks it on random and malformed lines).
"""

from __future__ import annotations

import sys
from typing import Any

import msgspec

from tracer import attributes as attrs
from tracer.spans.model import Span, kind_from_name
from tracer.spans.otlp import (
    _MARK_ATTRIBUTES,
    _MARK_EVENTS,
    _PHASE_EVENTS,
    _WANTED_EVENTS,
    _ZEROS,
    _any_value,
    _status_code,
    first_token_ns,
)

__all__ = ["traces_from_otlp_line"]

_intern = sys.intern


class _Value(msgspec.Struct, gc=False):
    """OTLP ``AnyValue``: the one field that is set. Booleans, arrays, maps and bytes
    stay as decoded and are converted as the general path converts them."""

    stringValue: str | None = None
    intValue: int | None = None
    doubleValue: float | None = None
    boolValue: Any = None
    arrayValue: Any = None
    kvlistValue: Any = None
    bytesValue: Any = None


class _KeyValue(msgspec.Struct, gc=False):
    key: str
    value: _Value | None = None


class _Event(msgspec.Struct, gc=False):
    name: str = ""
    timeUnixNano: int = 0


class _Status(msgspec.Struct, gc=False):
    code: int | str = 0


class _Span(msgspec.Struct, gc=False):
    traceId: str = ""
    spanId: str = ""
    parentSpanId: str = ""
    name: str = ""
    kind: int | str = 0
    startTimeUnixNano: int = 0
    endTimeUnixNano: int = 0
    attributes: list[_KeyValue] = []
    events: list[_Event] = []
    status: _Status | None = None


class _Scope(msgspec.Struct, gc=False):
    spans: list[_Span] = []


class _Resource(msgspec.Struct, gc=False):
    attributes: list[_KeyValue] = []


class _ResourceSpans(msgspec.Struct, gc=False):
    resource: _Resource | None = None
    scopeSpans: list[_Scope] = []
    instrumentationLibrarySpans: list[_Scope] = []


class _Request(msgspec.Struct, gc=False):
    resourceSpans: list[_ResourceSpans]


# strict=False: OTLP JSON writes 64-bit integers (times, intValue) as decimal strings.
_decode = msgspec.json.Decoder(_Request, strict=False).decode


def _value(v: _Value | None) -> Any:
    if v is None:
        return None
    if v.stringValue is not None:
        return v.stringValue
    if v.intValue is not None:
        return v.intValue
    if v.doubleValue is not None:
        return v.doubleValue
    if v.boolValue is not None:
        return bool(v.boolValue)
    if v.arrayValue is not None:
        return _any_value({"arrayValue": v.arrayValue})
    if v.kvlistValue is not None:
        return _any_value({"kvlistValue": v.kvlistValue})
    return v.bytesValue


def _attributes(items: list[_KeyValue]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in items:
        v = kv.value
        # Strings are most attributes: take them without a call.
        out[kv.key] = v.stringValue if v is not None and v.stringValue is not None else _value(v)
    return out


def _first_token(start_ns: int, events: list[_Event], attributes: dict[str, Any]) -> int | None:
    """:func:`~tracer.spans.otlp.first_token_ns` over decoded events."""
    marks = [(e.name, e.timeUnixNano) for e in events if e.name in _WANTED_EVENTS]
    return first_token_ns(start_ns, marks, attributes)


def traces_from_otlp_line(line: bytes) -> dict[str, list[Span]] | None:
    """The spans of one OTLP JSON line by trace id (in the order of the line), or None
    when the general path must read it."""
    try:
        request = _decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    out: dict[str, list[Span]] = {}
    bucket: list[Span] = []
    stage_key = attrs.STAGE
    ttfc, ttft = _MARK_ATTRIBUTES
    mark_events, phase_events = _MARK_EVENTS, _PHASE_EVENTS
    zeros16, zeros32 = _ZEROS[16], _ZEROS[32]
    intern = _intern
    good: set[str] = set()  # trace ids that passed the checks
    current = None  # the trace of the last span (spans of a trace come in runs)
    for rs in request.resourceSpans:
        service = "unknown_service"
        if rs.resource is not None and rs.resource.attributes:
            name = _attributes(rs.resource.attributes).get(attrs.SERVICE_NAME)
            if name:
                service = intern(str(name))
        for scope in rs.scopeSpans or rs.instrumentationLibrarySpans:
            for raw in scope.spans:
                # The general path's checks, inline; what fails them it reads itself
                # (and normalises or skips with a reason).
                trace_id = raw.traceId
                if trace_id != current:
                    if trace_id not in good:
                        if not (
                            len(trace_id) == 32
                            and (trace_id.islower() or trace_id.isdigit())
                            and trace_id != zeros32
                        ):
                            return None
                        good.add(trace_id)
                        out[trace_id] = []
                    current, bucket = trace_id, out[trace_id]
                span_id = raw.spanId
                if not (
                    len(span_id) == 16
                    and (span_id.islower() or span_id.isdigit())
                    and span_id != zeros16
                ):
                    return None
                parent: str | None = raw.parentSpanId
                if parent:
                    if not (
                        len(parent) == 16
                        and (parent.islower() or parent.isdigit())
                        and parent != zeros16
                    ):
                        return None
                else:
                    parent = None
                start_ns = raw.startTimeUnixNano
                end_ns = raw.endTimeUnixNano
                if not 0 < start_ns <= end_ns:
                    return None
                kind = raw.kind
                if type(kind) is not int or kind < 0 or kind > 5:
                    kind = kind_from_name(kind)
                items = raw.attributes
                if items:
                    attributes = {}
                    for kv in items:
                        v = kv.value
                        attributes[kv.key] = (
                            v.stringValue
                            if v is not None and v.stringValue is not None
                            else _value(v)
                        )
                    stage = attributes.get(stage_key)
                    if stage is not None:
                        stage = intern(stage) if type(stage) is str else str(stage)
                    general = ttfc in attributes or ttft in attributes
                else:
                    attributes, stage, general = {}, None, False
                first = None
                events = raw.events
                if events and not general:
                    for e in events:
                        name = e.name
                        if name in mark_events:
                            t = e.timeUnixNano
                            if t and (first is None or t < first):
                                first = t
                        elif name in phase_events:
                            general = True  # copied into the attributes there
                            break
                if general:
                    first = _first_token(start_ns, events, attributes)
                status = raw.status
                code = 0 if status is None else status.code
                bucket.append(
                    Span(
                        trace_id,
                        span_id,
                        parent,
                        service,
                        intern(raw.name),
                        kind,  # type: ignore[arg-type]
                        start_ns,
                        end_ns,
                        stage,
                        code if type(code) is int else _status_code(code),
                        first,
                        attributes,
                    )
                )
    return out
