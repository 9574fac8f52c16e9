"""Span snapshots: an ended span as one flat tuple of ints and strings.

A tuple that holds only such values is untracked by the garbage collector at its
first pass, so a snapshot waiting in ``tracer.sdk.batch``'s queue costs the collections
nothing (docs/overhead.md). Only a plain tuple is: a named tuple or a class with slots
stays tracked however plain its values, so the fields are named by their positions
(:data:`TRACE_ID`, :data:`NAME`, ...), written once here, and read by those names.

A snapshot is read from the fields the SDK's ``ReadableSpan`` constructor sets rather
than through a dozen properties: a third of the processor's work per span. Those
fields are no part of the SDK's API, so :func:`fast_span_type` checks once, on a span
that the installed SDK made, that they give the same snapshot as the properties
(:func:`public_snapshot`), which any SDK release gives.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import ReadableSpan

from tracer.sdk.probe import installed_version, probe_span, supported_range

__all__ = [
    "ATTRIBUTES",
    "END_NS",
    "KIND",
    "NAME",
    "PARENT_SPAN_ID",
    "RESOURCE_KEY",
    "SCOPE_NAME",
    "SCOPE_VERSION",
    "SPAN_ID",
    "START_NS",
    "STATUS_CODE",
    "STATUS_MESSAGE",
    "TRACE_ID",
    "TRACE_STATE",
    "Snapshot",
    "fast_snapshot",
    "fast_span_type",
    "public_snapshot",
    "snapshot",
]

_logger = logging.getLogger("tracer.sdk.batch")  # said where the processor says the rest

#: A flat tuple of the fields below, then a variable part: the attributes (their count
#: n at :data:`ATTRIBUTES`, n keys, n values), the events (a count, then each: name,
#: time_ns, its attributes as count, keys, values), the links (a count, then each:
#: trace_id, span_id, attributes), and last the W3C trace state (:data:`TRACE_STATE`).
Snapshot = tuple[Any, ...]

# Where each field of a snapshot is (its index).
TRACE_ID = 0  #: the trace id, an int
SPAN_ID = 1  #: the span id, an int
PARENT_SPAN_ID = 2  #: the parent's span id, or None for a root
NAME = 3  #: the span's name
KIND = 4  #: the span kind as OTLP numbers it (INTERNAL is 1)
START_NS = 5  #: the start, Unix nanoseconds
END_NS = 6  #: the end, Unix nanoseconds
STATUS_CODE = 7  #: the status code (0 unset, 1 ok, 2 error)
STATUS_MESSAGE = 8  #: the status description, or None
RESOURCE_KEY = 9  #: the key of the span's resource in the processor's map
SCOPE_NAME = 10  #: the instrumentation scope's name ("" when none)
SCOPE_VERSION = 11  #: the instrumentation scope's version, or None
ATTRIBUTES = 12  #: the number of attributes, the keys and values following
TRACE_STATE = -1  #: the W3C trace state's text, or None


def _attribute_dict(attrs: Any) -> dict[str, Any]:
    """The attributes as a dict (the SDK's BoundedAttributes keep one inside; any
    mapping works)."""
    if not attrs:
        return {}
    inner = getattr(attrs, "_dict", None)
    return inner if type(inner) is dict else dict(attrs)


def _public_dict(attrs: Any) -> dict[str, Any]:
    """The attributes as a dict, through the mapping protocol only."""
    return dict(attrs) if attrs else {}


def _extras(
    span: ReadableSpan, read: Callable[[Any], dict[str, Any]] = _attribute_dict
) -> tuple[Any, ...]:
    """The events and links part of a snapshot."""
    out: list[Any] = []
    events = span.events
    out.append(len(events))
    for event in events:
        d = read(event.attributes)
        out.extend((event.name, event.timestamp, len(d), *d, *d.values()))
    links = span.links
    out.append(len(links))
    for link in links:
        d = read(link.attributes)
        out.extend((link.context.trace_id, link.context.span_id, len(d), *d, *d.values()))
    return tuple(out)


_NO_EXTRAS = (0, 0)


def snapshot(span: ReadableSpan, resource_key: int) -> Snapshot:
    """The :data:`Snapshot` of an ended span: one flat tuple. Flat, because the
    collector untracks a tuple only when what it holds is untracked already, and it
    may visit an outer tuple before the inner ones. A plain ``ReadableSpan`` is read
    from its fields (the processor uses them only after :func:`fast_span_type`)."""
    if type(span) is ReadableSpan:  # what the SDK hands ``on_end``
        return fast_snapshot(span, resource_key)
    return public_snapshot(span, resource_key)


def public_snapshot(span: ReadableSpan, resource_key: int) -> Snapshot:
    """:func:`snapshot` read through the span's public properties only: what any SDK
    release gives, and what the fast way is checked against."""
    ctx = span.context
    parent = span.parent
    status = span.status
    scope = span.instrumentation_scope
    d = _public_dict(span.attributes)
    events, links = span.events, span.links
    return (
        ctx.trace_id,
        ctx.span_id,
        parent.span_id if parent is not None else None,
        span.name,
        span.kind.value + 1,  # the SDK counts from INTERNAL = 0, OTLP from 1
        span.start_time or 0,
        span.end_time or 0,
        status.status_code.value,
        status.description or None,
        resource_key,
        scope.name if scope is not None else "",
        scope.version if scope is not None else None,
        len(d),
        *d,
        *d.values(),
        *(_extras(span, _public_dict) if events or links else _NO_EXTRAS),
        ctx.trace_state.to_header() if ctx.trace_state else None,
    )


def fast_snapshot(span: Any, resource_key: int) -> Snapshot:
    """:func:`snapshot` of a plain ``ReadableSpan``, read from the fields its
    constructor sets rather than through a dozen properties (a third of the
    processor's work per span; a test compares both ways)."""
    context = span._context  # a SpanContext is a tuple
    trace_id, span_id, state = context[0], context[1], context[4]
    parent = span._parent
    status = span._status
    scope = span._instrumentation_scope
    raw = span._attributes
    d = raw._dict if type(raw) is BoundedAttributes else _attribute_dict(raw)
    # A BoundedList's truth is a Python-level __len__: look at its deque instead.
    events, links = span._events, span._links
    has_extras = getattr(events, "_dq", events) or getattr(links, "_dq", links)
    return (
        trace_id,
        span_id,
        parent[1] if parent is not None else None,
        span._name,
        span._kind._value_ + 1,  # the SDK counts from INTERNAL = 0, OTLP from 1
        span._start_time or 0,
        span._end_time or 0,
        status._status_code._value_,
        status._description or None,
        resource_key,
        scope.name if scope is not None else "",
        scope.version if scope is not None else None,
        len(d),
        *d,
        *d.values(),
        *(_extras(span) if has_extras else _NO_EXTRAS),
        state.to_header() if state else None,
    )


def fast_span_type() -> type | None:
    """The class of the spans the SDK hands ``on_end``, when a snapshot read from their
    fields equals one read through their properties; else None, said at WARNING.

    None without a word when the SDK is disabled: it hands processors no spans.
    """
    try:
        probe = probe_span()
    except Exception as exc:  # noqa: BLE001 - telemetry never breaks the app
        problem = f"no span could be made to check it ({type(exc).__name__}: {exc})"
    else:
        if probe is None:
            return None
        try:
            same = (
                fast_snapshot(probe, 0) == public_snapshot(probe, 0)
                and probe._context[3] == probe.context.trace_flags  # type: ignore[index]
                and probe._resource is probe.resource
            )
            problem = "" if same else "its fields hold other values than its properties"
        except Exception as exc:  # noqa: BLE001 - a field renamed or gone
            problem = f"a field it reads is missing ({type(exc).__name__}: {exc})"
        if not problem:
            return type(probe)
    tested = supported_range("opentelemetry-sdk")
    _logger.warning(
        "hoptrace: the fast way of reading spans does not work with opentelemetry-sdk %s "
        "(%s); spans are read through their properties instead, which costs more CPU "
        "per span%s",
        installed_version("opentelemetry-sdk"),
        problem,
        f" (hoptrace is tested with opentelemetry-sdk{tested})" if tested else "",
    )
    return None
