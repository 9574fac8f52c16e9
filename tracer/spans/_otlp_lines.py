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
from itertools import repeat
from operator import attrgetter, itemgetter, le
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, UnsetType

from tracer import attributes as attrs
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

__all__ = ["traces_from_otlp_line"]

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
_RAW_TRACE, _RAW_NAME, _RAW_KIND = attrgetter("traceId"), attrgetter("name"), attrgetter("kind")
_RAW_START, _RAW_END = attrgetter("startTimeUnixNano"), attrgetter("endTimeUnixNano")
_RAW_ATTRIBUTES, _RAW_EVENTS = attrgetter("attributes"), attrgetter("events")
_RAW_STATUS, _RAW_STATE = attrgetter("status"), attrgetter("traceState")
_SHARED, _STAGE = itemgetter(0), itemgetter(1)
_KINDS = frozenset(range(6))

# strict=False: OTLP JSON writes 64-bit integers (times, intValue) as decimal strings.
_decode = msgspec.json.Decoder(_Request, strict=False).decode
_decode_raw_list = msgspec.json.Decoder(list[msgspec.Raw]).decode
_decode_pair = msgspec.json.Decoder(_KeyValue, strict=False).decode
#: Attribute lists seen (their JSON text) and what they decode to: most spans of a
#: service repeat a few lists (their stage, operation, model), which are then not
#: decoded again. Cleared when full.
_SEEN_ATTRIBUTES: dict[bytes, tuple[dict[str, Any], str | None, bool]] = {}
_SEEN_MAX = 4096
#: Longer texts (prompts, completions) are decoded each time, so the memo holds at most
#: _SEEN_MAX x _SEEN_BYTES (8 MiB) of them.
_SEEN_BYTES = 2048
#: Key-value pairs seen (their JSON text) and their (key, value), for the lists not
#: seen whole: at most _SEEN_MAX x _PAIR_BYTES (2 MiB) of text.
_SEEN_PAIRS: dict[bytes, tuple[str, Any]] = {}
_PAIR_BYTES = 512


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
    a first-token mark (then the general path's first-token rules apply).

    Each key-value pair is looked up by its own JSON text first (:data:`_SEEN_PAIRS`):
    a list seen for the first time mostly repeats pairs seen before (its stage, model,
    operation) next to one or two of its own (a response id, a latency)."""
    pairs = _remembered(list(map(bytes, _decode_raw_list(text))), _SEEN_PAIRS, _pair, _PAIR_BYTES)
    attributes = dict(pairs)
    stage = attributes.get(attrs.STAGE)
    if stage is not None:
        stage = _intern(stage) if type(stage) is str else str(stage)
    ttfc, ttft = _MARK_ATTRIBUTES
    return attributes, stage, ttfc in attributes or ttft in attributes


def _remembered(
    texts: list[bytes], memo: dict[bytes, Any], decode: Callable[[bytes], Any], longest: int
) -> list[Any]:
    """What ``decode`` makes of each text, from ``memo`` where it was seen before; new
    texts up to ``longest`` bytes are remembered (the memo is emptied when it holds
    :data:`_SEEN_MAX`)."""
    found: list[Any] = list(map(memo.get, texts))
    if None in found:
        for i, text in enumerate(texts):
            if found[i] is None:
                found[i] = value = decode(text)
                if len(text) <= longest:
                    if len(memo) >= _SEEN_MAX:
                        memo.clear()
                    memo[text] = value
    return found


def _pair(text: bytes) -> tuple[str, Any]:
    """One attribute's key and value from its JSON text; a number the analysis cannot
    use sends the line to the general path (which drops the value and says so)."""
    kv = _decode_pair(text)
    key, v = _intern(kv.key), kv.value
    value = v.stringValue if type(v) is _Value and type(v.stringValue) is str else _value(v)
    if key in NUMERIC_KEYS and attribute_problem(key, value):
        raise _StepAside
    return key, value


def _first_token(start_ns: int, events: list[_Event], attributes: dict[str, Any]) -> int | None:
    """:func:`~tracer.spans.otlp.first_token_ns` over decoded events."""
    marks = [(e.name, e.timeUnixNano) for e in events if e.name in _WANTED_EVENTS]
    return first_token_ns(start_ns, marks, attributes)


def traces_from_otlp_line(line: bytes) -> dict[str, list[Span]] | None:
    """The spans of one OTLP JSON line by trace id (in the order of the line), or None
    when the general path must read it."""
    try:
        return _traces(_decode(line))
    except (msgspec.DecodeError, msgspec.ValidationError, _StepAside):
        return None
    except RecursionError:
        # Values nested deeper than msgspec or _big recurse: orjson reads up to 1024
        # levels, and the general path reads values MAX_VALUE_DEPTH deep.
        return None


def _traces(request: _Request) -> dict[str, list[Span]] | None:
    """The spans of a decoded line by trace id, a scope's spans a column at a time:
    each field of every span is taken, checked and converted by C-level ``map`` calls
    over the scope (one per field, not one Python step per span and field); only spans
    with events, and attribute lists not seen before, take a step of their own."""
    out: dict[str, list[Span]] = {}
    canonical: dict[str, str] = {}  # one string per trace id, for all its spans
    for rs in request.resourceSpans:
        service = "unknown_service"
        if rs.resource is not None and rs.resource.attributes:
            name = _attributes(rs.resource.attributes).get(attrs.SERVICE_NAME)
            if name:
                service = _intern(str(name))
        for scope in rs.scopeSpans or rs.instrumentationLibrarySpans:
            raws = scope.spans
            if raws and not _scope(raws, service, out, canonical):
                return None
    return out


def _scope(
    raws: list[_Span], service: str, out: dict[str, list[Span]], canonical: dict[str, str]
) -> bool:
    """Add a scope's spans to ``out``; False: the line must take the general path.

    The general path's checks, on columns (what fails them it reads itself, and
    normalises or skips with a reason): ids (see :func:`_ids_ok`), trace ids, times
    inside ``_LAX_INT``..``TIME_LIMIT_NS`` with start <= end, marks inside the limit."""
    n = len(raws)
    ids = list(map(_RAW_ID, raws))
    parents = list(map(_RAW_PARENT, raws))
    if not _ids_ok(ids, 16, _ZEROS[16]):
        return False
    present = list(filter(None, parents))
    if present and not _ids_ok(present, 16, _ZEROS[16]):
        return False
    if len(present) != n:
        parents = [p or None for p in parents]
    trace_ids = list(map(_RAW_TRACE, raws))
    for trace_id in set(trace_ids).difference(canonical):
        if not (
            len(trace_id) == 32
            and (trace_id.islower() or trace_id.isdigit())
            and trace_id != _ZEROS[32]
        ):
            return False
    trace_ids = list(map(canonical.setdefault, trace_ids, trace_ids))
    starts = list(map(_RAW_START, raws))
    ends = list(map(_RAW_END, raws))
    if not (_LAX_INT < min(starts) and max(ends) < TIME_LIMIT_NS and all(map(le, starts, ends))):
        return False
    kinds = list(map(_RAW_KIND, raws))
    if not _KINDS.issuperset(kinds):
        kinds = [k if type(k) is int and 0 <= k <= 5 else kind_from_name(k) for k in kinds]
    texts = list(map(bytes, map(_RAW_ATTRIBUTES, raws)))
    # (attributes, stage, names a mark) of each span
    seen = _remembered(texts, _SEEN_ATTRIBUTES, _span_attributes, _SEEN_BYTES)
    # Spans without events whose attributes name no mark share their decoded attributes
    # (the analysis reads a span's attributes and never writes them).
    attributes = list(map(_SHARED, seen))
    stages = list(map(_STAGE, seen))
    firsts: list[int | None] = [None] * n
    events = list(map(_RAW_EVENTS, raws))
    lax, limit, marks = _LAX_INT, TIME_LIMIT_NS, _MARK_EVENTS
    for i in [i for i, (e, s) in enumerate(zip(events, seen, strict=True)) if e or s[2]]:
        if len(events[i]) == 1 and not seen[i][2]:  # one event, as most spans with one
            event = events[i][0]
            if event.name in marks:
                t = event.timeUnixNano
                if lax < t < limit:
                    firsts[i] = t
                    continue
            elif event.name not in _WANTED_EVENTS:
                continue  # an event the analysis does not read
        first = _marks(starts[i], events[i], seen[i][2], attributes, i)
        if first is False:
            return False
        firsts[i] = first  # type: ignore[assignment]
    statuses = list(map(_RAW_STATUS, raws))
    codes: Any = repeat(0)
    if any(statuses):
        codes = [0 if st is None else st.code for st in statuses]
        if not all(type(c) is int for c in codes):
            codes = [c if type(c) is int else _status_code(c) for c in codes]
    states = [s or None for s in map(_RAW_STATE, raws)]
    spans = list(
        map(
            Span,
            trace_ids,
            ids,
            parents,
            repeat(service),
            map(_intern, map(_RAW_NAME, raws)),
            kinds,
            starts,
            ends,
            stages,
            codes,
            firsts,
            attributes,
            states,
        )
    )
    current = None
    bucket: list[Span] = []
    for trace_id, span in zip(trace_ids, spans, strict=True):
        if trace_id is not current:
            current = trace_id
            found_bucket = out.get(trace_id)
            if found_bucket is None:
                found_bucket = out[trace_id] = []
            bucket = found_bucket
        bucket.append(span)
    return True


def _marks(
    start_ns: int, events: list[_Event], general: bool, attributes: list[dict[str, Any]], i: int
) -> int | None | bool:
    """The first-token mark of span ``i`` from its events (and, when they or its
    attributes call for the general path's rules, from those, on a copy of its
    attributes that takes the phase events); False: the line takes the general path."""
    lax = _LAX_INT
    first = None
    for e in events:
        name = e.name
        if name in _MARK_EVENTS:
            t = e.timeUnixNano
            if t <= lax and t and -lax <= t:
                return False  # perhaps a lax "5.0" (see _LAX_INT)
            if t and (first is None or t < first):
                first = t
        elif name in _PHASE_EVENTS:
            t = e.timeUnixNano
            if t <= lax and t and -lax <= t:
                return False
            general = True  # copied into the attributes there
        elif name in _DETAIL_EVENTS:
            return False  # its attributes: the general path reads them
    if general:
        attributes[i] = own = attributes[i].copy()
        first = _first_token(start_ns, events, own)
    if first is not None and not 0 < first < TIME_LIMIT_NS:
        return False
    return first
