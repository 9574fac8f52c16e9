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
from tracer.spans._details import DETAIL_KEYS, merge_details
from tracer.spans.model import Span
from tracer.spans.otlp import first_token_ns

__all__ = ["DETAIL_KEYS", "EventRecord", "merge_details", "with_events"]

#: One event: its name, its time (Unix ns, 0 when unknown) and its attributes.
EventRecord = tuple[str, int, dict[str, Any]]


def with_events(span: Span, events: Iterable[EventRecord]) -> Span:
    """``span`` as if ``events`` had been among its span events (a new span; ``span``
    is left as it is)."""
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
