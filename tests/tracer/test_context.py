"""hoptrace's attach and detach behave as the OpenTelemetry API's, and are the API's own
when the API keeps its context in another way."""

from __future__ import annotations

import contextvars
import logging

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext

from tracer.instrument import context as _context


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


def test_current_span_reads_the_span_get_current_span_reads():
    span = trace.NonRecordingSpan(trace.SpanContext(1, 2, is_remote=False))
    assert _context.current_span() is trace.get_current_span() is trace.INVALID_SPAN
    token = _context.attach(_context.with_span(span))
    try:
        assert _context.current_span() is trace.get_current_span() is span
        inner = _context.attach(otel_context.set_value(trace._SPAN_KEY, "not a span"))
        try:
            assert _context.current_span() is trace.get_current_span() is trace.INVALID_SPAN
        finally:
            _context.detach(inner)
    finally:
        _context.detach(token)
    assert _context.current_span() is trace.INVALID_SPAN


class _RenamedVariable(ContextVarsRuntimeContext):
    """The API's runtime context as a release that renamed its variable keeps it."""

    def __init__(self) -> None:
        self._context_variable = contextvars.ContextVar("current_context", default=Context())  # noqa: B039 - as the API

    def attach(self, context):
        return self._context_variable.set(context)

    def get_current(self):
        return self._context_variable.get()

    def detach(self, token) -> None:
        self._context_variable.reset(token)


class _OtherVariable(_RenamedVariable):
    """A runtime context whose old variable is still there but no longer used."""

    def __init__(self) -> None:
        super().__init__()
        self._current_context = contextvars.ContextVar("stale", default=Context())  # noqa: B039 - as the API


def _said(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "attaching contexts" in r.getMessage()]


def test_the_api_functions_are_used_and_said_once_when_the_context_variable_is_renamed(caplog):
    with caplog.at_level(logging.WARNING, logger="tracer.instrument.context"):
        var = _context._context_var(_RenamedVariable(), _RenamedVariable)
    assert var is None
    said = _said(caplog)
    assert len(said) == 1 and "keeps no context variable" in said[0], said


def test_the_api_functions_are_used_when_the_context_variable_is_not_the_one_in_use(caplog):
    with caplog.at_level(logging.WARNING, logger="tracer.instrument.context"):
        var = _context._context_var(_OtherVariable(), _OtherVariable)
    assert var is None
    said = _said(caplog)
    assert len(said) == 1 and "is not the current one" in said[0], said


def test_the_context_variable_is_used_without_a_word_with_the_apis_runtime_context(caplog):
    with caplog.at_level(logging.WARNING, logger="tracer.instrument.context"):
        var = _context._context_var(ContextVarsRuntimeContext())
    assert isinstance(var, contextvars.ContextVar) and _said(caplog) == []
    assert _context.attach is not otel_context.attach  # this API: the fast functions


def test_another_runtime_context_gets_the_api_functions_without_a_word(caplog):
    with caplog.at_level(logging.WARNING, logger="tracer.instrument.context"):
        assert _context._context_var(_RenamedVariable()) is None
    assert _said(caplog) == []
