"""hoptrace's default sampler decides exactly as the SDK's ``parentbased_always_on``."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import DEFAULT_ON, ParentBased
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

from tracer.sampling.samplers import ParentBasedAlwaysOn, default_sampler

_STATE = TraceState([("vendor", "x1")])


def _parent(*, remote: bool, sampled: bool | None) -> trace.Span:
    """A parent span: None for no parent at all (a root span)."""
    if sampled is None:
        return trace.INVALID_SPAN
    flags = TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
    ctx = SpanContext(0xABC, 0xDEF, is_remote=remote, trace_flags=flags, trace_state=_STATE)
    return NonRecordingSpan(ctx)


@pytest.mark.parametrize("remote", [False, True])
@pytest.mark.parametrize("sampled", [None, False, True])
@pytest.mark.parametrize("attributes", [None, {"k": "v", "n": 2}])
def test_every_parent_gets_the_sdk_default_samplers_decision(remote, sampled, attributes):
    context = trace.set_span_in_context(_parent(remote=remote, sampled=sampled))
    ours = ParentBasedAlwaysOn().should_sample(context, 0xABC, "s", attributes=attributes)
    sdk = DEFAULT_ON.should_sample(context, 0xABC, "s", attributes=attributes)
    assert ours.decision == sdk.decision
    assert dict(ours.attributes) == dict(sdk.attributes)
    assert ours.trace_state == sdk.trace_state


def test_it_describes_itself_as_the_sdk_default():
    sampler = ParentBasedAlwaysOn()
    assert isinstance(sampler, ParentBased)
    assert sampler.get_description() == DEFAULT_ON.get_description()


def test_spans_of_both_providers_carry_the_same_flags_and_trace_state():
    def child_of(parent: trace.Span, sampler) -> SpanContext:
        t = TracerProvider(sampler=sampler).get_tracer("t")
        span = t.start_span("c", context=trace.set_span_in_context(parent))
        span.end()
        return span.get_span_context()

    for remote in (False, True):
        for sampled in (None, False, True):
            parent = _parent(remote=remote, sampled=sampled)
            ours, sdk = child_of(parent, ParentBasedAlwaysOn()), child_of(parent, DEFAULT_ON)
            assert (ours.trace_flags, ours.trace_state) == (sdk.trace_flags, sdk.trace_state)


@pytest.mark.parametrize("value", [None, "parentbased_always_on", "ParentBased_Always_On"])
def test_setup_uses_it_for_the_default_sampler(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("OTEL_TRACES_SAMPLER", raising=False)
    else:
        monkeypatch.setenv("OTEL_TRACES_SAMPLER", value)
    assert isinstance(default_sampler(), ParentBasedAlwaysOn)


@pytest.mark.parametrize("value", ["always_off", "traceidratio", "parentbased_always_off", "bad"])
def test_any_other_sampler_variable_is_left_to_the_sdk(monkeypatch, value):
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", value)
    assert default_sampler() is None
