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
(``tests/tracer/test_otlp_lines.py`` checks it on random and malformed lines).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from operator import attrgetter
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, UnsetType

from tracer import attributes as attrs
from tracer._compiled import enabled as compiled_parts_enabled
from tracer.spans._numbers import NUMBER_BOUNDS as _BOUNDS
from tracer.spans._numbers import NUMERIC_KEYS, TIME_LIMIT_NS, attribute_problem
from tracer.spans.model import Span, kind_from_name
from tracer.spans.otlp import (
    _DETAIL_EVENTS,
    _MARK_ATTRIBUTES,
    _MARK_EVENTS,
    _PHASE_EVENTS,
    _WANTED_EVENTS,
    _ZEROS,
    _any_value,
    _status_code,
    first_token_ns,
)

__all__ = ["traces_from_otlp_line", "typed_traces"]

_intern = sys.intern

#: JSON integers orjson reads as ints: past these it reads a float (and the general path
#: then has the float's value), so the typed path steps aside (msgspec has no bound
#: past int64).
_MIN_INT, _MAX_INT = -(2**63), 2**63 - 1
_Int = Annotated[int, msgspec.Meta(ge=_MIN_INT, le=_MAX_INT)]
#: With strict=False msgspec also reads a string such as "5.0" or "1e3" as the int 5 or
#: 1000 (where int() in the general path refuses it); it does so only up to 2**53 in
#: magnitude. Times that small are not real Unix nanoseconds: such spans and events
#: go to the general path.
_LAX_INT = 2**53


class _StepAside(Exception):
    """The line must take the general path."""


class _Value(msgspec.Struct, gc=False):
    """OTLP ``AnyValue``: the one field that is set. Booleans, arrays, maps and bytes
    stay as decoded and are converted as the general path converts them. UNSET tells
    a missing field from a null one (the general path reads them differently); an
    intValue or doubleValue string is converted by int() or float() as the general path
    does (str in the union: msgspec's lax mode would read "null" as None and "-0" as
    0.0)."""

    stringValue: str | None | UnsetType = UNSET
    intValue: _Int | str | None | UnsetType = UNSET
    doubleValue: float | str | None | UnsetType = UNSET
    boolValue: Any = UNSET
    arrayValue: Any = UNSET
    kvlistValue: Any = UNSET
    bytesValue: Any = UNSET


class _KeyValue(msgspec.Struct, gc=False):
    key: str
    # str: a bare string is the general path's value as it is (and lax mode would read
    # "null" as None).
    value: _Value | str | None = None


class _Event(msgspec.Struct, gc=False):
    name: str = ""
    timeUnixNano: _Int = 0


class _Status(msgspec.Struct, gc=False):
    code: _Int | str = 0


#: A span's attributes as their JSON text, decoded by :func:`_span_attributes`.
_NO_ATTRIBUTES = msgspec.Raw(b"[]")


class _Span(msgspec.Struct, gc=False):
    traceId: str = ""
    spanId: str = ""
    parentSpanId: str = ""
    name: str = ""
    kind: _Int | str = 0
    startTimeUnixNano: _Int = 0
    endTimeUnixNano: _Int = 0
    attributes: msgspec.Raw = _NO_ATTRIBUTES
    events: list[_Event] = []
    status: _Status | None = None
    traceState: str = ""


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


_RAW_ID, _RAW_PARENT = attrgetter("spanId"), attrgetter("parentSpanId")

# strict=False: OTLP JSON writes 64-bit integers (times, intValue) as decimal strings.
_decode = msgspec.json.Decoder(_Request, strict=False).decode
_decode_attributes = msgspec.json.Decoder(list[_KeyValue], strict=False).decode
#: Attribute lists seen (their JSON text) and what they decode to: most spans of a
#: service repeat a few lists (their stage, operation, model), which are then not
#: decoded again. Cleared when full.
_SEEN_ATTRIBUTES: dict[bytes, tuple[dict[str, Any], str | None, bool]] = {}
_SEEN_MAX = 4096
#: Longer texts (prompts, completions) are decoded each time, so the memo holds at most
#: _SEEN_MAX x _SEEN_BYTES (8 MiB) of them.
_SEEN_BYTES = 2048


def _big(raw: Any) -> bool:
    """Whether a decoded JSON value holds an integer orjson would read as a float."""
    if type(raw) is int:
        return not _MIN_INT <= raw <= _MAX_INT
    if type(raw) is list:
        return any(_big(x) for x in raw)
    if type(raw) is dict:
        return any(_big(x) for x in raw.values())
    return False


_FIELDS = (
    "stringValue",
    "intValue",
    "doubleValue",
    "boolValue",
    "arrayValue",
    "kvlistValue",
    "bytesValue",
)
_NESTED = frozenset(("arrayValue", "kvlistValue", "bytesValue"))
_astuple = msgspec.structs.astuple


def _value(v: _Value | str | None) -> Any:
    """The general path's value of ``v`` (raises _StepAside when it cannot tell)."""
    if type(v) is not _Value:
        return v  # None, or a bare string: as _any_value
    if v.stringValue is not UNSET:
        # A string, or null: the general path reads stringValue first, whatever else is set.
        return v.stringValue
    raw = v.intValue
    if (  # token counts: the usual value that is not a string, alone
        raw is not UNSET
        and v.doubleValue is UNSET
        and v.boolValue is UNSET
        and v.arrayValue is UNSET
        and v.kvlistValue is UNSET
        and v.bytesValue is UNSET
    ):
        if type(raw) is int or raw is None:  # None: as int(None) fails in _any_value
            return raw
        try:  # as _any_value does
            return int(raw)
        except ValueError:
            return raw
    fields = _astuple(v)
    unset = fields.count(UNSET)
    if unset == len(fields):
        return None
    if unset != len(fields) - 1:
        raise _StepAside  # several fields: the general path takes the first in the line's order
    key, raw = next((k, x) for k, x in zip(_FIELDS, fields, strict=True) if x is not UNSET)
    if key in _NESTED and _big(raw):
        raise _StepAside
    return _any_value({key: raw})


def _ids_ok(ids: list[str], width: int, zeros: str) -> bool:
    """Whether every id is ``width`` characters of ``[0-9a-z]`` and not all zeros: then
    each passes the general path's own check (lower case or all digits, not zeros),
    which the fast path would otherwise make span by span. False sends the line to the
    general path, which checks (and normalises or rejects) each id itself."""
    try:
        joined = "".join(ids).encode("ascii")  # bytes: their checks are ASCII-only, and fast
    except UnicodeEncodeError:
        return False
    return (
        set(map(len, ids)) == {width}
        and joined.isalnum()
        and (joined.islower() or joined.isdigit())
        and zeros not in ids
    )


def _attributes(items: list[_KeyValue]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in items:
        v = kv.value
        # Strings are most attributes: take them without a call.
        out[kv.key] = (
            v.stringValue if type(v) is _Value and type(v.stringValue) is str else _value(v)
        )
    return out


def _span_attributes(text: bytes) -> tuple[dict[str, Any], str | None, bool]:
    """A span's attributes from their JSON text, its own stage, and whether it names
    a first-token mark (then the general path's first-token rules apply)."""
    attributes: dict[str, Any] = {}
    for kv in _decode_attributes(text):
        v = kv.value
        if type(v) is _Value:
            string = v.stringValue
            if type(string) is str:
                attributes[_intern(kv.key)] = string
                continue
            number = v.doubleValue
            if (  # latencies: a float alone, which the general path takes as it is
                type(number) is float
                and string is UNSET
                and v.intValue is UNSET
                and v.boolValue is UNSET
                and v.arrayValue is UNSET
                and v.kvlistValue is UNSET
                and v.bytesValue is UNSET
            ):
                attributes[_intern(kv.key)] = number
                continue
        attributes[_intern(kv.key)] = _value(v)
    stage = attributes.get(attrs.STAGE)
    if stage is not None:
        stage = _intern(stage) if type(stage) is str else str(stage)
    if not NUMERIC_KEYS.isdisjoint(attributes):
        for key in NUMERIC_KEYS.intersection(attributes):
            value = attributes[key]
            bound = _BOUNDS.get(key)
            if (  # the usual token count or latency: no call (NUMBER_BOUNDS)
                bound is not None
                and (type(value) is int or type(value) is float)
                and -bound <= value <= bound
            ):
                continue
            if attribute_problem(key, value):
                raise _StepAside  # the general path drops the value and says so
    ttfc, ttft = _MARK_ATTRIBUTES
    return attributes, stage, ttfc in attributes or ttft in attributes


def _first_token(start_ns: int, events: list[_Event], attributes: dict[str, Any]) -> int | None:
    """:func:`~tracer.spans.otlp.first_token_ns` over decoded events."""
    marks = [(e.name, e.timeUnixNano) for e in events if e.name in _WANTED_EVENTS]
    return first_token_ns(start_ns, marks, attributes)


def _seen(text: bytes) -> tuple[dict[str, Any], str | None, bool]:
    """What a span's attribute text decodes to, remembered (see _SEEN_ATTRIBUTES)."""
    seen = _SEEN_ATTRIBUTES.get(text)
    if seen is None:
        seen = _span_attributes(text)
        if len(text) <= _SEEN_BYTES:
            if len(_SEEN_ATTRIBUTES) >= _SEEN_MAX:
                _SEEN_ATTRIBUTES.clear()
            _SEEN_ATTRIBUTES[text] = seen
    return seen


_STEP_ASIDE = (msgspec.DecodeError, msgspec.ValidationError, _StepAside, RecursionError)


def _remember(text: bytes) -> tuple[dict[str, Any], str | None, bool] | None:
    """:func:`_seen` for the compiled decoder: None where the line must step aside."""
    try:
        return _seen(text)
    except _STEP_ASIDE:
        return None


_SERVICES: dict[bytes, str] = {}


def _service_of(text: bytes) -> str | None:
    """A resource's service name from its attribute list's JSON text, as :func:`_traces`
    reads it, for the compiled decoder (None: step aside); remembered, since a
    service's lines repeat their resource."""
    service = _SERVICES.get(text)
    if service is None:
        try:
            items = _decode_attributes(text)
            name = _attributes(items).get(attrs.SERVICE_NAME) if items else None
        except _STEP_ASIDE:
            return None
        service = _intern(str(name)) if name else "unknown_service"
        if len(_SERVICES) >= _SEEN_MAX:
            _SERVICES.clear()
        _SERVICES[text] = service
    return service


def _compiled() -> Callable[[bytes], dict[str, list[Span]] | None] | None:
    """The compiled decoder (``tracer/spans/_native.c``), configured, or None: not
    built (no C compiler at install), or ``HOPTRACE_NATIVE=off``."""
    if not compiled_parts_enabled("decoder"):
        return None
    try:
        from tracer.spans import _native
    except ImportError:
        return None
    _native.configure(
        Span,
        _SEEN_ATTRIBUTES,
        _remember,
        _service_of,
        first_token_ns,
        "unknown_service",
        sorted(_MARK_EVENTS),
        sorted(_PHASE_EVENTS),
        sorted(_DETAIL_EVENTS),
        sorted(_WANTED_EVENTS),
        _LAX_INT,
        TIME_LIMIT_NS,
        {key: float(bound) for key, bound in _BOUNDS.items()},
        # values decided on, not only read: the stage, the numbers always checked
        frozenset((NUMERIC_KEYS - _BOUNDS.keys()) | {attrs.STAGE}),
        frozenset(NUMERIC_KEYS | {attrs.STAGE}),  # and for strings, every numeric key
    )
    return _native.decode


_native_decode = _compiled()


def traces_from_otlp_line(line: bytes) -> dict[str, list[Span]] | None:
    """The spans of one OTLP JSON line by trace id (in the order of the line), or None
    when the general path must read it. The compiled decoder reads the line first, when
    it is built; what it steps aside from the typed one reads."""
    if _native_decode is not None:
        found = _native_decode(line)
        if found is not None:
            return found
    return typed_traces(line)


def typed_traces(line: bytes) -> dict[str, list[Span]] | None:
    """:func:`traces_from_otlp_line` without the compiled decoder: msgspec's structures,
    then Python (the reference the compiled decoder is tested against)."""
    try:
        return _traces(_decode(line))
    except _STEP_ASIDE:
        # (RecursionError: values nested deeper than msgspec or _big recurse; orjson
        # reads up to 1024 levels, and the general path reads values MAX_VALUE_DEPTH deep.)
        return None


def _traces(request: _Request) -> dict[str, list[Span]] | None:
    out: dict[str, list[Span]] = {}
    bucket: list[Span] = []
    lax, limit = _LAX_INT, TIME_LIMIT_NS
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
            raws = scope.spans
            if not raws:
                continue
            # The general path's id checks, for the whole scope at once (see _ids_ok).
            ids = list(map(_RAW_ID, raws))
            parents = list(map(_RAW_PARENT, raws))
            if not _ids_ok(ids, 16, zeros16):
                return None
            present = list(filter(None, parents))
            if present and not _ids_ok(present, 16, zeros16):
                return None
            for raw, span_id, parent in zip(raws, ids, parents, strict=True):
                # The general path's other checks, inline; what fails them it reads
                # itself (and normalises or skips with a reason).
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
                start_ns = raw.startTimeUnixNano
                end_ns = raw.endTimeUnixNano
                if not lax < start_ns <= end_ns < limit:
                    return None
                kind = raw.kind
                if type(kind) is not int or kind < 0 or kind > 5:
                    kind = kind_from_name(kind)
                shared, stage, general = _seen(bytes(raw.attributes))
                attributes = shared.copy()  # each span its own dict, as the general path
                first = None
                events = raw.events
                if events:
                    for e in events:
                        name = e.name
                        if name in mark_events:
                            t = e.timeUnixNano
                            if t <= lax and t and -lax <= t:
                                return None  # perhaps a lax "5.0" (see _LAX_INT)
                            if t and (first is None or t < first):
                                first = t
                        elif name in phase_events:
                            t = e.timeUnixNano
                            if t <= lax and t and -lax <= t:
                                return None
                            general = True  # copied into the attributes there
                        elif name in _DETAIL_EVENTS:
                            return None  # its attributes: the general path reads them
                if general:
                    first = _first_token(start_ns, events, attributes)
                if first is not None and not 0 < first < limit:
                    return None
                status = raw.status
                code = 0 if status is None else status.code
                bucket.append(
                    Span(
                        current,  # one string for the trace's spans (the others die now)
                        span_id,
                        parent or None,
                        service,
                        intern(raw.name),
                        kind,  # type: ignore[arg-type]
                        start_ns,
                        end_ns,
                        stage,
                        code if type(code) is int else _status_code(code),
                        first,
                        attributes,
                        raw.traceState or None,
                    )
                )
    return out
