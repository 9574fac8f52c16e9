"""Events of a span, whether they came as span events or as OTLP log records.

OpenTelemetry is moving events from spans to log records that carry the span's trace
and span id (OTEP 4430; GenAI instrumentations emit theirs so). hoptrace reads both
forms the same way, so either gives the same answer:

- a first-token mark (:data:`~tracer.spans.otlp` names them: ``hoptrace.first_token``,
  OpenLLMetry's chunk events, OpenInference's ``First Token Stream Event``) at the
  event's time; the earliest mark wins;
- a phase event (Triton's ``QUEUE_START``, ``COMPUTE_START``, ``COMPUTE_END``) kept as
  ``hoptrace.event_ns.<NAME>``;
- the GenAI operation-details event (``gen_ai.client.inference.operation.details``)
  gives its span the keys of :data:`DETAIL_KEYS` it does not carry itself: token
  usage, cached and reasoning tokens, the time to first chunk.

A span's own attributes always win over an event's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from tracer import attributes as attrs
from tracer.spans.model import Span

__all__ = ["DETAIL_KEYS", "EventRecord", "merge_details", "with_events"]

#: One event: its name, its time (Unix ns, 0 when unknown) and its attributes.
EventRecord = tuple[str, int, dict[str, Any]]

#: What an operation-details event may tell of its span.
DETAIL_KEYS = (
    attrs.GEN_AI_INPUT_TOKENS,
    attrs.GEN_AI_OUTPUT_TOKENS,
    attrs.GEN_AI_PROMPT_TOKENS,
    attrs.GEN_AI_COMPLETION_TOKENS,
    attrs.GEN_AI_CACHE_READ_TOKENS,
    attrs.GEN_AI_CACHE_WRITE_TOKENS,
    attrs.GEN_AI_CACHE_CREATION_TOKENS,
    attrs.GEN_AI_REASONING_TOKENS,
    attrs.GEN_AI_TIME_TO_FIRST_CHUNK,
    attrs.GEN_AI_RESPONSE_MODEL,
    attrs.GEN_AI_REQUEST_MODEL,
)


def merge_details(attributes: dict[str, Any], event_attributes: dict[str, Any]) -> None:
    """Copy into ``attributes`` the :data:`DETAIL_KEYS` of an operation-details event
    that it lacks."""
    for key in DETAIL_KEYS:
        if key in event_attributes and key not in attributes:
            attributes[key] = event_attributes[key]


def with_events(span: Span, events: Iterable[EventRecord]) -> Span:
    """``span`` as if ``events`` had been among its span events (a new span; ``span``
    is left as it is)."""
    from tracer.spans.otlp import first_token_ns

    attributes = dict(span.attributes)
    marks = []
    for name, time_ns, event_attributes in events:
        marks.append((name, time_ns))
        if name == attrs.GEN_AI_DETAILS_EVENT:
            merge_details(attributes, event_attributes)
    first = first_token_ns(span.start_ns, marks, attributes)
    if span.first_token_ns is not None and (first is None or span.first_token_ns < first):
        first = span.first_token_ns
    return msgspec.structs.replace(span, attributes=attributes, first_token_ns=first)
