"""The consistent probability sampler keeps a ratio of whole traces and writes its
threshold in the trace state, as the OpenTelemetry probability-sampling spec says."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

import tracer
from tests.helpers import fresh_tracer_provider
from tracer._errors import ConfigError
from tracer.sampling.samplers import ConsistentProbabilitySampler, default_sampler
from tracer.sampling.threshold import (
    adjusted_count,
    encode_threshold,
    parse_tracestate_threshold,
    probability_to_threshold,
)

_LOW56 = (1 << 56) - 1


@pytest.mark.parametrize(
    ("probability", "text"),
    [(1.0, "0"), (0.5, "8"), (0.25, "c"), (0.1, "e666"), (0.01, "fd70a"), (0.001, "ffbe77")],
)
def test_thresholds_match_the_specifications_table_at_four_digits(probability, text):
    assert encode_threshold(probability_to_threshold(probability)) == text


def test_a_threshold_read_back_gives_the_adjusted_count():
    th = parse_tracestate_threshold("vendor=x,ot=th:e666;rv:00000000000001")
    assert th == probability_to_threshold(0.1)
    assert adjusted_count(th) == pytest.approx(9.99938968568813)
    assert parse_tracestate_threshold("ot=th:xyz") is None
    assert parse_tracestate_threshold("vendor=x") is None


def _provider(ratio: float) -> tuple[trace.Tracer, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ConsistentProbabilitySampler(ratio))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("t"), exporter


def test_a_root_is_kept_exactly_when_its_randomness_reaches_the_threshold():
    sampler = ConsistentProbabilitySampler(0.1)
    th = probability_to_threshold(0.1)
    for low in (0, th - 1, th, _LOW56):
        trace_id = (0xABCDEF << 64) | low
        result = sampler.should_sample(None, trace_id, "root")
        assert result.decision.is_sampled() == (low >= th)
        if low >= th:
            assert result.trace_state.get("ot") == "th:e666"


def test_about_a_tenth_of_the_traces_are_kept_whole_with_the_threshold_on_every_span():
    t, exporter = _provider(0.1)
    n = 4000
    unsampled_recording = 0
    for _ in range(n):  # the SDK's random trace ids
        with t.start_as_current_span("root") as root:
            with t.start_as_current_span("child") as child:
                unsampled_recording += (not root.is_recording()) and child.is_recording()
    spans = exporter.get_finished_spans()
    roots = [s for s in spans if s.parent is None]
    children = [s for s in spans if s.parent is not None]
    # 10% of 4000 is 400, its standard deviation 19: 5 of them either side.
    assert 305 <= len(roots) <= 495
    assert len(children) == len(roots)
    assert {s.context.trace_id for s in children} == {s.context.trace_id for s in roots}
    assert all(s.context.trace_state.get("ot") == "th:e666" for s in spans)
    assert unsampled_recording == 0


def test_children_keep_the_parents_whole_trace_state_and_decision():
    t, exporter = _provider(0.5)
    state = TraceState([("vendor", "v1"), ("ot", "th:8")])
    for sampled in (True, False):
        flags = TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
        low = (1 << 55) if sampled else 0  # consistent with th:8 (50%)
        parent = SpanContext(low | (9 << 64), 0xDEF, True, flags, state)
        span = t.start_span("c", context=trace.set_span_in_context(NonRecordingSpan(parent)))
        assert span.is_recording() == sampled
        assert span.get_span_context().trace_state == state
        span.end()
    assert len(exporter.get_finished_spans()) == 1


@pytest.mark.parametrize(
    ("sampled", "low", "ot", "kept"),
    [
        (True, 0, "th:8", None),  # randomness 0 is below the threshold: inconsistent
        (False, 1 << 55, "th:8", None),  # not sampled, yet the threshold says kept
        (True, 0, "th:8;rv:ffffffffffffff", "th:8;rv:ffffffffffffff"),  # rv decides
        (True, 0, "th:8;rv:00000000000001", "rv:00000000000001"),
    ],
)
def test_a_remote_parents_inconsistent_threshold_is_erased(sampled, low, ot, kept):
    sampler = ConsistentProbabilitySampler(0.5)
    flags = TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
    state = TraceState([("vendor", "v1"), ("ot", ot)])
    parent = SpanContext((5 << 64) | low, 0xDEF, True, flags, state)
    result = sampler.should_sample(
        trace.set_span_in_context(NonRecordingSpan(parent)), parent.trace_id, "c"
    )
    assert result.trace_state.get("ot") == kept
    assert result.trace_state.get("vendor") == "v1"


def test_a_ratio_of_zero_keeps_nothing_and_one_keeps_everything_at_th_zero():
    assert (
        not ConsistentProbabilitySampler(0).should_sample(None, _LOW56, "r").decision.is_sampled()
    )
    result = ConsistentProbabilitySampler(1).should_sample(None, 1 << 64, "r")
    assert result.decision.is_sampled() and result.trace_state.get("ot") == "th:0"


@pytest.mark.parametrize("ratio", [-0.1, 1.5, "0.1", True, float("nan")])
def test_a_bad_ratio_is_refused(ratio):
    with pytest.raises(ValueError, match="sample_ratio must be a number in 0..1"):
        ConsistentProbabilitySampler(ratio)


def test_the_standard_variables_select_it(monkeypatch):
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0.25")
    sampler = default_sampler()
    assert isinstance(sampler, ConsistentProbabilitySampler) and sampler.ratio == 0.25
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "lots")
    with pytest.raises(ConfigError, match="OTEL_TRACES_SAMPLER_ARG must be a number"):
        default_sampler()


def test_setup_installs_it_from_the_keyword_and_refuses_bad_input():
    fresh_tracer_provider()
    try:
        provider = tracer.setup("svc", sample_ratio=0.1, exporter=InMemorySpanExporter())
        assert isinstance(provider.sampler, ConsistentProbabilitySampler)
        assert provider.sampler.ratio == 0.1
        tracer.shutdown()
        with pytest.raises(ConfigError, match="sample_ratio must be"):
            tracer.setup("svc", sample_ratio=2.0, exporter=InMemorySpanExporter())
        with pytest.raises(ConfigError, match="not both"):
            tracer.setup("svc", sample_ratio=0.1, sampler=ConsistentProbabilitySampler(0.5))
    finally:
        tracer.shutdown()
        fresh_tracer_provider()


def test_a_stage_under_an_unsampled_parent_makes_no_span_and_keeps_its_context():
    from opentelemetry import context

    fresh_tracer_provider()
    exporter = InMemorySpanExporter()
    try:
        tracer.setup("svc", sample_ratio=0.5, exporter=exporter)
        seen = {}
        for sampled in (False, True):
            flags = TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
            low = (1 << 55) if sampled else 0  # consistent with th:8
            ctx = SpanContext((7 << 64) | low, 0xABC, True, flags, TraceState([("ot", "th:8")]))
            token = context.attach(trace.set_span_in_context(NonRecordingSpan(ctx)))
            try:
                with tracer.stage("auth") as span:
                    inner = trace.get_current_span().get_span_context()
                    recording = span.is_recording()
            finally:
                context.detach(token)
            seen[sampled] = (recording, inner.trace_id == ctx.trace_id, inner.span_id)
        assert seen[False] == (False, True, 0xABC)  # the parent's unsampled context
        assert seen[True][:2] == (True, True) and seen[True][2] != 0xABC
        assert tracer.force_flush()
        assert [s.name for s in exporter.get_finished_spans()] == ["auth"]
    finally:
        tracer.shutdown()
        fresh_tracer_provider()
