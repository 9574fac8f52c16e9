"""The default sampler, ``parentbased_always_on``, without its delegation.

The SDK's ``ParentBased(ALWAYS_ON)`` looks up the parent span, picks one of five
delegate samplers, calls it with keyword arguments, and the delegate looks the parent
up again for its trace state: about 4,600 of the 115,000 instructions a span costs
(callgrind, docs/overhead.md). :class:`ParentBasedAlwaysOn` decides the same in one
look: it is a ``ParentBased(ALWAYS_ON)`` (same description, same delegates) whose
``should_sample`` inlines what those delegates return.

``tracer.setup`` uses it when no sampler is given and ``OTEL_TRACES_SAMPLER`` names
the default (or is unset); any other sampler is the SDK's own.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_ON,
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
)
from opentelemetry.trace import Link, SpanKind, get_current_span
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

__all__ = ["ParentBasedAlwaysOn", "default_sampler"]

_RECORD_AND_SAMPLE = Decision.RECORD_AND_SAMPLE
_DROP = Decision.DROP


class ParentBasedAlwaysOn(ParentBased):
    """``ParentBased(ALWAYS_ON)``, deciding in one step: a span whose parent is valid
    and not sampled is dropped; every other span is recorded and sampled, with its
    attributes and its parent's trace state, as the SDK's delegates give them."""

    def __init__(self) -> None:
        super().__init__(ALWAYS_ON)

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        parent = get_current_span(parent_context).get_span_context()
        if parent is None or not parent.is_valid:  # a root: ALWAYS_ON, no trace state
            return SamplingResult(_RECORD_AND_SAMPLE, attributes, None)
        if parent.trace_flags.sampled:  # remote or local, ALWAYS_ON
            return SamplingResult(_RECORD_AND_SAMPLE, attributes, parent.trace_state)
        return SamplingResult(_DROP, None, parent.trace_state)  # ALWAYS_OFF


def default_sampler() -> Sampler | None:
    """:class:`ParentBasedAlwaysOn` when ``OTEL_TRACES_SAMPLER`` is unset or names it;
    None (the SDK reads the variable) for any other value."""
    name = os.environ.get("OTEL_TRACES_SAMPLER", "parentbased_always_on").lower()
    return ParentBasedAlwaysOn() if name == "parentbased_always_on" else None
