"""hoptrace's attach and detach behave as the OpenTelemetry API's."""

from __future__ import annotations

import contextvars
import logging

from opentelemetry import context as otel_context
from opentelemetry import trace

from tracer import _context


def test_attach_sets_the_context_the_api_reads_and_detach_restores_it():
    token = _context.attach(otel_context.set_value("hoptrace-k", 1))
    assert otel_context.get_value("hoptrace-k") == 1
    _context.detach(token)
    assert otel_context.get_value("hoptrace-k") is None


def test_tokens_are_interchangeable_with_the_apis():
    otel_context.detach(_context.attach(otel_context.set_value("hoptrace-k", 2)))
    assert otel_context.get_value("hoptrace-k") is None
    _context.detach(otel_context.attach(otel_context.set_value("hoptrace-k", 3)))
    assert otel_context.get_value("hoptrace-k") is None


def test_a_failed_detach_is_logged_as_the_api_logs_it_and_never_raised(caplog):
    token = contextvars.copy_context().run(
        _context.attach, otel_context.set_value("hoptrace-k", 4)
    )  # made in another context: resetting it here fails
    with caplog.at_level(logging.ERROR, logger="opentelemetry.context"):
        _context.detach(token)
        otel_context.detach(token)
    messages = [(r.name, r.getMessage()) for r in caplog.records]
    assert messages == [("opentelemetry.context", "Failed to detach context")] * 2


def test_with_span_makes_the_context_set_span_in_context_makes():
    span = trace.NonRecordingSpan(trace.SpanContext(1, 2, is_remote=False))
    token = _context.attach(otel_context.set_value("hoptrace-k", 5))
    try:
        ours, api = _context.with_span(span), trace.set_span_in_context(span)
    finally:
        _context.detach(token)
    assert type(ours) is type(api) and ours == api
    assert trace.get_current_span(ours) is span and ours["hoptrace-k"] == 5
