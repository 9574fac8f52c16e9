"""OTLP -> :class:`Span`: from OTLP JSON (dicts) and from OTLP protobuf messages.

OTLP JSON ids are hex strings (OTLP/JSON spec); ids in base64, as protobuf's generic
JSON mapping writes them, are accepted too. Times are decimal strings (or ints) of
nanoseconds.
"""

from __future__ import annotations

import base64
import binascii
import sys
from collections.abc import Iterator
from typing import Any

from tracer import attributes as attrs
from tracer import engines
from tracer.spans._details import merge_details
from tracer.spans._numbers import TIME_LIMIT_NS
from tracer.spans.model import Span, Warnings, kind_from_name

__all__ = ["first_token_ns", "normalize_id", "spans_from_otlp_json", "spans_from_otlp_proto"]


_ZEROS = {16: "0" * 16, 32: "0" * 32}
# Service, stage and operation names repeat across millions of spans: one string
# object each saves memory and makes pickling between workers cheap (memo hits).
_intern = sys.intern


def normalize_id(value: Any, width: int) -> str | None:
    """Lower-case hex id padded to ``width`` hex digits; None for empty or all-zero ids.

    Accepts hex (padded or not) and base64 of the raw bytes.
    """
    if type(value) is str and len(value) == width:
        # The common case, hex of the right width: no further check (a non-hex id of
        # that width still works as a key; base64 of the same bytes is shorter).
        if value == _ZEROS[width]:
            return None
        return value if value.islower() or value.isdigit() else value.lower()
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        text = bytes(value).hex()
    elif isinstance(value, int):
        text = format(value, "x")
    else:
        text = str(value).strip()
        if not text:
            return None
        try:
            bytes.fromhex(text if len(text) % 2 == 0 else "0" + text)
        except ValueError:
            try:
                text = base64.b64decode(text, validate=True).hex()
            except (binascii.Error, ValueError):
                return None
    text = text.lower().rjust(width, "0")
    if len(text) != width or not text.strip("0"):
        return None
    return text


#: Deepest array/kvlist nesting kept; deeper values become None (the collector refuses
#: such spans at ingest, files are read as far as is sensible).
MAX_VALUE_DEPTH = 32


def _text_or_none(key: Any) -> str | None:
    return key if type(key) is str else None


def _any_value(value: Any, depth: int = 0) -> Any:
    if not isinstance(value, dict):
        return value
    if depth > MAX_VALUE_DEPTH:
        return None
    for key, raw in value.items():
        if key == "stringValue":
            return raw
        if key == "intValue":
            try:
                return int(raw)
            except (TypeError, ValueError, OverflowError):
                return raw
        if key == "doubleValue":
            try:
                return float(raw)
            except (TypeError, ValueError):
                return raw
        if key == "boolValue":
            return bool(raw)
        if key == "arrayValue":
            values = raw.get("values") if isinstance(raw, dict) else None
            return [_any_value(v, depth + 1) for v in values] if isinstance(values, list) else []
        if key == "kvlistValue":
            values = raw.get("values") if isinstance(raw, dict) else None
            return {  # a key that is not text (an object, a list) is no key: None, which
                # the collector refuses and the analysis reads as null
                _text_or_none(kv.get("key")): _any_value(kv.get("value"), depth + 1)
                for kv in (values if isinstance(values, list) else [])
                if isinstance(kv, dict)
            }
        if key == "bytesValue":
            return raw
    return None


def _attr_dict(items: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if type(items) is list:
        for kv in items:
            try:
                value = kv["value"]
                # Strings are most attributes: take them without a call.
                out[kv["key"]] = (
                    value["stringValue"]
                    if type(value) is dict and "stringValue" in value
                    else _any_value(value)
                )
            except (KeyError, TypeError):
                if isinstance(kv, dict) and isinstance(kv.get("key"), str):
                    out[kv["key"]] = _any_value(kv.get("value"))
    return out


#: Events that mark the first token or chunk; the earliest wins.
_MARK_EVENTS = frozenset(
    {
        attrs.FIRST_TOKEN_EVENT,
        attrs.CHUNK_EVENT,
        attrs.LEGACY_CHUNK_EVENT,
        attrs.OPENINFERENCE_FIRST_TOKEN_EVENT,
    }
)
#: Attributes in seconds from the span's start that mark the first token.
_MARK_ATTRIBUTES = (attrs.GEN_AI_TIME_TO_FIRST_CHUNK, attrs.GEN_AI_LATENCY_TTFT)
#: Events whose time is kept as an attribute (an engine's phases, Triton's).
_PHASE_EVENTS = engines.PHASE_EVENTS
#: Events whose attributes tell of their span (:mod:`tracer.spans.events`).
_DETAIL_EVENTS = frozenset({attrs.GEN_AI_DETAILS_EVENT})
_WANTED_EVENTS = _MARK_EVENTS | _PHASE_EVENTS | _DETAIL_EVENTS
#: A first-token time later than this (seconds from the span's start) is not believed.
_MAX_MARK_S = 86_400.0


def first_token_ns(start_ns: int, events: Any, attributes: dict[str, Any]) -> int | None:
    """The span's first-token mark, the earliest of the recognised ones.

    ``events`` is an iterable of (name, Unix ns). Recognised: the events
    ``hoptrace.first_token``, ``gen_ai.content.completion.chunk`` and
    ``llm.content.completion.chunk`` (OpenLLMetry, one per chunk) and ``First Token
    Stream Event`` (OpenInference); the attributes
    ``gen_ai.response.time_to_first_chunk`` and ``gen_ai.latency.time_to_first_token``
    (seconds from the span's start). Phase events (Triton's ``QUEUE_START``,
    ``COMPUTE_START``, ``COMPUTE_END``) are copied into ``attributes`` as
    ``hoptrace.event_ns.<NAME>`` on the way.
    """
    best: int | None = None
    for name, time_ns in events:
        if not (time_ns and 0 < time_ns < TIME_LIMIT_NS):
            continue  # no time, or one outside 1970..2200
        if name in _MARK_EVENTS:
            if best is None or time_ns < best:
                best = int(time_ns)
        elif name in _PHASE_EVENTS:
            key = attrs.EVENT_TIME_PREFIX + name
            if key not in attributes:
                attributes[key] = int(time_ns)
    for key in _MARK_ATTRIBUTES:
        seconds = attributes.get(key)
        if (
            isinstance(seconds, (int, float))
            and not isinstance(seconds, bool)
            and 0 <= seconds < _MAX_MARK_S
        ):
            mark = start_ns + int(round(seconds * 1e9))
            if best is None or mark < best:
                best = mark
    return best


def spans_from_otlp_json(obj: Any, warnings: Warnings) -> Iterator[Span]:
    """Spans of one OTLP JSON ``{"resourceSpans": [...]}`` object.

    Spans that cannot be used (no ids, bad times) are counted in ``warnings``.
    """
    if not isinstance(obj, dict) or not isinstance(obj.get("resourceSpans"), list):
        warnings.skip("an object without a resourceSpans list was skipped", 0)
        return
    for rs in obj["resourceSpans"]:
        if not isinstance(rs, dict):
            warnings.skip("a resourceSpans entry that is not an object was skipped", 0)
            continue
        raw_resource = rs.get("resource")
        resource = _attr_dict(
            raw_resource.get("attributes") if isinstance(raw_resource, dict) else None
        )
        service = _intern(str(resource.get(attrs.SERVICE_NAME) or "unknown_service"))
        scopes = rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []
        for ss in scopes if isinstance(scopes, list) else []:
            spans = ss.get("spans") if isinstance(ss, dict) else None
            if isinstance(spans, list):
                yield from _spans_from_json(spans, service, warnings)


_NO_TRACE = object()


def _spans_from_json(raws: list[Any], service: str, warnings: Warnings) -> Iterator[Span]:
    # The fast path: well-formed spans as the SDK exporters and the Collector write them,
    # checked and built inline (this loop is most of the time spent reading a file).
    # Anything unusual goes to the careful path, which gives the same span or a reason.
    # The last trace id that passed the checks (spans come in runs); until one has, a
    # value no trace id equals (an empty or missing id must not pass unchecked).
    good_trace: object = _NO_TRACE
    zeros16 = _ZEROS[16]
    stage_key = attrs.STAGE
    mark_attributes = _MARK_ATTRIBUTES
    for raw in raws:
        try:
            trace_id = raw["traceId"]
            span_id = raw["spanId"]
            start_ns = int(raw["startTimeUnixNano"])
            end_ns = int(raw["endTimeUnixNano"])
            kind = raw.get("kind", 0)
            parent = raw.get("parentSpanId")
            if (
                (trace_id == good_trace or _fast_trace_id(trace_id))
                and type(span_id) is str
                and len(span_id) == 16
                and (span_id.islower() or span_id.isdigit())
                and span_id != zeros16
                and 0 < start_ns <= end_ns
                and type(kind) is int
                and 0 <= kind <= 5
            ):
                good_trace = trace_id
                if parent:
                    if not (
                        type(parent) is str
                        and len(parent) == 16
                        and (parent.islower() or parent.isdigit())
                        and parent != zeros16
                    ):
                        parent = normalize_id(parent, 16) if type(parent) is str else 0
                        if parent == 0:
                            raise TypeError
                else:
                    parent = None
                items = raw.get("attributes")
                attributes = _attr_dict(items) if items else {}
                stage = attributes.get(stage_key)
                events = raw.get("events")
                if events or mark_attributes[0] in attributes or mark_attributes[1] in attributes:
                    first = _first_token(start_ns, events, attributes)
                else:
                    first = None
                status = raw.get("status")
                name = raw.get("name")
                state = raw.get("traceState")
                yield Span(
                    trace_id,
                    span_id,
                    parent,
                    service,
                    _intern(name) if type(name) is str else str(name or ""),
                    kind,
                    start_ns,
                    end_ns,
                    _intern(stage) if type(stage) is str else _stage_text(stage),
                    _status_code(status.get("code", 0)) if type(status) is dict else 0,
                    first,
                    attributes,
                    state if state and type(state) is str else None,
                )
                continue
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
            pass
        span = _span_from_json_careful(raw, service, warnings)
        if span is not None:
            yield span


def _fast_trace_id(trace_id: Any) -> bool:
    return (
        type(trace_id) is str
        and len(trace_id) == 32
        and (trace_id.islower() or trace_id.isdigit())
        and trace_id != _ZEROS[32]
    )


def _span_from_json(raw: Any, service: str, warnings: Warnings) -> Span | None:
    """One span from OTLP JSON, or None (counted in ``warnings``)."""
    for span in _spans_from_json([raw], service, warnings):
        return span
    return None


def _stage_text(stage: Any) -> str | None:
    return str(stage) if stage is not None else None


def _first_token(start_ns: int, events: Any, attributes: dict[str, Any]) -> int | None:
    """:func:`first_token_ns` over OTLP JSON events, reading only the recognised ones."""
    best: int | None = None
    if events and type(events) is list:
        for e in events:
            if type(e) is dict:
                name = e.get("name")
                if type(name) is str and name in _WANTED_EVENTS:
                    if name not in _MARK_EVENTS:
                        break  # a phase or details event: the general path below reads it
                    time_ns = _event_time(e)
                    if time_ns and (best is None or time_ns < best):
                        best = time_ns
        else:
            if _MARK_ATTRIBUTES[0] not in attributes and _MARK_ATTRIBUTES[1] not in attributes:
                return best
        wanted = [
            (e["name"], _event_time(e))
            for e in events
            if type(e) is dict and type(e.get("name")) is str and e["name"] in _WANTED_EVENTS
        ]
        for e in events:
            if type(e) is dict and e.get("name") in _DETAIL_EVENTS:
                merge_details(attributes, _attr_dict(e.get("attributes")))
        return first_token_ns(start_ns, wanted, attributes)
    if _MARK_ATTRIBUTES[0] in attributes or _MARK_ATTRIBUTES[1] in attributes:
        return first_token_ns(start_ns, (), attributes)
    return None


def _event_time(event: dict[str, Any]) -> int:
    try:
        return int(event["timeUnixNano"] or 0)
    except (KeyError, TypeError, ValueError, OverflowError):
        return 0


def _span_from_json_careful(raw: Any, service: str, warnings: Warnings) -> Span | None:
    if not isinstance(raw, dict):
        warnings.skip("a span that is not an object was skipped")
        return None
    trace_id = normalize_id(raw.get("traceId"), 32)
    span_id = normalize_id(raw.get("spanId"), 16)
    if trace_id is None or span_id is None:
        warnings.skip("spans without a trace id or span id were skipped")
        return None
    try:
        start_ns = int(raw.get("startTimeUnixNano") or 0)
        end_ns = int(raw.get("endTimeUnixNano") or 0)
    except (TypeError, ValueError, OverflowError):
        warnings.skip("spans with unreadable start or end times were skipped")
        return None
    if start_ns <= 0 or end_ns <= 0:
        warnings.skip("spans without start or end times were skipped")
        return None
    if end_ns < start_ns:
        warnings.skip("spans that end before they start were skipped")
        return None
    attributes = _attr_dict(raw.get("attributes"))
    events = raw.get("events")
    status = raw.get("status")
    code = status.get("code", 0) if isinstance(status, dict) else 0
    stage = attributes.get(attrs.STAGE)
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=normalize_id(raw.get("parentSpanId"), 16),
        service=service,
        name=str(raw.get("name") or ""),
        kind=kind_from_name(raw.get("kind", 0)),
        start_ns=start_ns,
        end_ns=end_ns,
        stage=str(stage) if stage is not None else None,
        status=_status_code(code),
        first_token_ns=_first_token(start_ns, events, attributes),
        attributes=attributes,
        trace_state=_trace_state(raw.get("traceState")),
    )


def _trace_state(value: Any) -> str | None:
    return value if value and type(value) is str else None


def _status_code(code: Any) -> int:
    if type(code) is int:
        return code
    if isinstance(code, float) and code.is_integer():
        return int(code)
    if isinstance(code, str):
        return {"STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}.get(code.upper(), 0)
    return 0


def _proto_value(value: Any) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_proto_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _proto_value(kv.value) for kv in value.kvlist_value.values}
    if which == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, which)


def spans_from_otlp_proto(request: Any, warnings: Warnings) -> Iterator[Span]:
    """Spans of an ``ExportTraceServiceRequest`` (or ``TracesData``) message."""
    for rs in request.resource_spans:
        service = "unknown_service"
        for kv in rs.resource.attributes:
            if kv.key == attrs.SERVICE_NAME:
                service = str(_proto_value(kv.value))
        for ss in rs.scope_spans:
            for raw in ss.spans:
                trace_id = raw.trace_id.hex() if len(raw.trace_id) == 16 else None
                span_id = raw.span_id.hex() if len(raw.span_id) == 8 else None
                if not trace_id or not span_id or not trace_id.strip("0"):
                    warnings.skip("spans without a trace id or span id were skipped")
                    continue
                start_ns, end_ns = raw.start_time_unix_nano, raw.end_time_unix_nano
                if start_ns <= 0 or end_ns < start_ns:
                    warnings.skip("spans with missing or reversed times were skipped")
                    continue
                attributes = {kv.key: _proto_value(kv.value) for kv in raw.attributes}
                for e in raw.events:
                    if e.name in _DETAIL_EVENTS:
                        details = {kv.key: _proto_value(kv.value) for kv in e.attributes}
                        merge_details(attributes, details)
                stage = attributes.get(attrs.STAGE)
                yield Span(
                    trace_id=trace_id,
                    span_id=span_id,
                    parent_id=raw.parent_span_id.hex() if len(raw.parent_span_id) else None,
                    service=service,
                    name=raw.name,
                    kind=int(raw.kind),
                    start_ns=start_ns,
                    end_ns=end_ns,
                    stage=str(stage) if stage is not None else None,
                    status=int(raw.status.code),
                    first_token_ns=first_token_ns(
                        start_ns, ((e.name, e.time_unix_nano) for e in raw.events), attributes
                    ),
                    attributes=attributes,
                    trace_state=raw.trace_state or None,
                )
