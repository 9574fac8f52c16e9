"""Invariants over random span trees (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracer.analysis import own_times, prepare, retime
from tracer.spans import Warnings
from tracer.spans.model import KIND_CLIENT, KIND_INTERNAL, KIND_SERVER, Span

STAGES = ["client", "gateway", "auth", "context", "inference", None]
T0 = 1_700_000_000_000_000_000


@st.composite
def span_trees(draw):
    n = draw(st.integers(min_value=1, max_value=25))
    spans = []
    for i in range(n):
        parent = None if i == 0 else draw(st.integers(min_value=0, max_value=i - 1))
        start = draw(st.integers(min_value=0, max_value=1_000_000))
        length = draw(st.integers(min_value=0, max_value=1_000_000))
        service = draw(st.sampled_from(["a", "b", "c"]))
        kind = draw(st.sampled_from([KIND_INTERNAL, KIND_CLIENT, KIND_SERVER]))
        stage = draw(st.sampled_from(STAGES))
        spans.append(
            Span(
                "f" * 32,
                f"{i + 1:016x}",
                None if parent is None else f"{parent + 1:016x}",
                service,
                f"op{i}",
                kind,
                T0 + start,
                T0 + start + length,
                stage,
                0,
                None,
                {},
            )
        )
    if draw(st.booleans()):  # an orphan whose parent never arrived
        spans.append(
            Span(
                "f" * 32,
                "00000000000000ff",
                "00000000000000fe",
                "a",
                "orphan",
                KIND_INTERNAL,
                T0 + 10,
                T0 + 20,
                None,
                0,
                None,
                {},
            )
        )
    return spans


def _prepared(spans):
    trace = prepare("f" * 32, spans, Warnings())
    assert trace is not None
    return trace


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(span_trees())
def test_stage_times_are_non_negative_and_sum_to_end_to_end(spans):
    trace = _prepared(spans)
    own = own_times(trace.root, trace.children, trace.start, trace.end)
    assert all(v >= 0 for v in own.values())
    assert sum(own.values()) == trace.e2e_ns


@settings(max_examples=300, deadline=None)
@given(span_trees(), st.sampled_from(STAGES[:-1]))
def test_retiming_with_k_1_changes_nothing(spans, stage):
    trace = _prepared(spans)
    new_start, new_end = retime(trace, stage, 1.0)
    assert new_end[trace.root] - new_start[trace.root] == pytest.approx(trace.e2e_ns, abs=1e-3)


@settings(max_examples=300, deadline=None)
@given(span_trees(), st.sampled_from(STAGES[:-1]), st.floats(min_value=1.0, max_value=1000.0))
def test_retiming_never_makes_a_trace_slower(spans, stage, k):
    trace = _prepared(spans)
    new_start, new_end = retime(trace, stage, k)
    assert new_end[trace.root] - new_start[trace.root] <= trace.e2e_ns + 1e-3
    after = own_times(trace.root, trace.children, new_start, new_end)
    assert sum(after.values()) == pytest.approx(
        new_end[trace.root] - new_start[trace.root], abs=1e-3
    )
