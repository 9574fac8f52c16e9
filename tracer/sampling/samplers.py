"""The default sampler, ``parentbased_always_on``, without its delegation.

The SDK's ``ParentBased(ALWAYS_ON)`` looks up the parent span, picks one of five
delegate samplers, calls it with keyword arguments, and the delegate looks the parent
up again for its trace state: about 4,600 of the 115,000 instructions a span costs
(callgrind, docs/overhead.md). :class:`ParentBasedAlwaysOn` decides the same in one
look: it is a ``ParentBased(ALWAYS_ON)`` (same description, same delegates) whose
``should_sample`` inlines what those delegates return.

:class:`ConsistentProbabilitySampler` samples a ratio of the traces (``tracer.setup(
sample_ratio=...)``, or ``OTEL_TRACES_SAMPLER=parentbased_traceidratio``): consistent
probability sampling with the threshold written in the trace state (``ot=th:...``),
parent-based, so a trace is kept or dropped whole and every kept span says what it
stands for (docs/sampling.md).

``tracer.setup`` uses :func:`default_sampler` when no sampler is given: one of these two
when ``OTEL_TRACES_SAMPLER`` names the default (or is unset) or
``parentbased_traceidratio``; for any other value the SDK's own.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextvars import ContextVar, Token

from opentelemetry.context import Context
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
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

from tracer._errors import ConfigError
from tracer.sampling.threshold import (
    MAX_THRESHOLD,
    OT_KEY,
    encode_threshold,
    parse_ot,
    probability_to_threshold,
    with_ot_value,
)

__all__ = [
    "ConsistentProbabilitySampler",
    "ParentBasedAlwaysOn",
    "PresetIdGenerator",
    "default_sampler",
    "preset_trace_id",
    "reset_preset",
]

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


_RANDOM_BITS = MAX_THRESHOLD - 1  # the trace id's last 56 bits


class ConsistentProbabilitySampler(ParentBased):
    """Keeps ``ratio`` of the traces, consistently: a root span is kept when the last
    56 bits of its trace id (random, W3C Trace Context Level 2) are at or above the
    rejection threshold of ``ratio`` (four hexadecimal digits, as the specification
    recommends), and a kept root writes that threshold in its trace state
    (``ot=th:e666`` for 10%). Every other span follows its parent's decision and
    carries its parent's trace state; a remote parent's threshold that contradicts
    its decision (sampled with its randomness below the threshold, or the reverse) is
    erased, as the specification asks (its trace's weight is then
    unknown). Dropped spans are the SDK's non-recording spans.

    Args:
        ratio: the share of traces to keep, 0..1 (0 keeps none).

    Raises:
        ValueError: a ratio outside 0..1.
    """

    def __init__(self, ratio: float) -> None:
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 <= ratio <= 1:
            raise ValueError(f"sample_ratio must be a number in 0..1, got {ratio!r}")
        super().__init__(ALWAYS_ON)
        self.ratio = float(ratio)
        kept = self.ratio >= 2.0**-56
        self._threshold = probability_to_threshold(self.ratio) if kept else MAX_THRESHOLD
        self._root_state = TraceState([(OT_KEY, f"th:{encode_threshold(self._threshold)}")])

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
        if parent is None or not parent.is_valid:  # a root: the threshold decides
            if trace_id & _RANDOM_BITS >= self._threshold:
                return SamplingResult(_RECORD_AND_SAMPLE, attributes, self._root_state)
            return SamplingResult(_DROP, None, None)
        state = parent.trace_state
        if parent.is_remote and state is not None and OT_KEY in state:
            state = _consistent(state, trace_id, parent.trace_flags.sampled)
        if parent.trace_flags.sampled:
            return SamplingResult(_RECORD_AND_SAMPLE, attributes, state)
        return SamplingResult(_DROP, None, state)

    def get_description(self) -> str:
        return f"ParentBased{{root=ConsistentProbability{{ratio={self.ratio}}}}}"

    def keeps(self, trace_id: int) -> bool:
        """Whether a root span of ``trace_id`` is kept."""
        return trace_id & _RANDOM_BITS >= self._threshold


_preset: ContextVar[int | None] = ContextVar("hoptrace_preset_trace_id", default=None)


class PresetIdGenerator(RandomIdGenerator):
    """The SDK's random ids, except that the next trace id made in a context where
    :func:`preset_trace_id` set one is that one (once): a request whose root the
    server middleware decided in advance (``tracer.sampling.unsampled``) gets the trace id the
    decision was made on, so the sampler decides the same."""

    def generate_trace_id(self) -> int:
        preset = _preset.get()
        if preset is not None:
            _preset.set(None)
            return preset
        return super().generate_trace_id()


def preset_trace_id(trace_id: int | None) -> Token[int | None]:
    """Make ``trace_id`` the next trace id :class:`PresetIdGenerator` gives in this
    context; reset with the token (``_preset.reset``) when the request is done."""
    return _preset.set(trace_id)


def reset_preset(token: Token[int | None]) -> None:
    """Undo :func:`preset_trace_id`."""
    _preset.reset(token)


def _consistent(state: TraceState, trace_id: int, sampled: bool) -> TraceState:
    """``state`` with its ``th`` erased when the parent's decision contradicts it."""
    value = state[OT_KEY]
    threshold, randomness = parse_ot(value)
    if threshold is None:
        return state
    r = trace_id & _RANDOM_BITS if randomness is None else randomness
    if sampled == (r >= threshold):
        return state
    stripped = with_ot_value(value, None)
    return state.update(OT_KEY, stripped) if stripped else state.delete(OT_KEY)


def default_sampler() -> Sampler | None:
    """:class:`ParentBasedAlwaysOn` when ``OTEL_TRACES_SAMPLER`` is unset or names it,
    :class:`ConsistentProbabilitySampler` of ``OTEL_TRACES_SAMPLER_ARG`` (default 1)
    for ``parentbased_traceidratio``; None (the SDK reads the variable) for any other
    value.

    Raises:
        ConfigError: ``OTEL_TRACES_SAMPLER_ARG`` is not a number in 0..1.
    """
    name = os.environ.get("OTEL_TRACES_SAMPLER", "parentbased_always_on").strip().lower()
    if name == "parentbased_always_on":
        return ParentBasedAlwaysOn()
    if name == "parentbased_traceidratio":
        text = os.environ.get("OTEL_TRACES_SAMPLER_ARG", "").strip() or "1"
        try:
            return ConsistentProbabilitySampler(float(text))
        except ValueError:
            raise ConfigError(
                f"OTEL_TRACES_SAMPLER_ARG must be a number in 0..1, got {text!r}"
            ) from None
    return None
