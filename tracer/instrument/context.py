"""``attach`` and ``detach`` of the OpenTelemetry context for hoptrace's hot paths.

A streamed stage attaches its span's context around every chunk it pulls from the
wrapped generator (so that spans started inside it are its children) and detaches it
after: twenty times a request in the demo chain. Through the API each pair costs four
Python calls (``attach`` -> the runtime context's ``attach`` -> ``ContextVar.set``,
the same for ``detach``), about 4,200 instructions under callgrind. With the API's
default runtime context, which is one ``ContextVar``, these functions call that
variable directly: the same ``set`` and ``reset``, the same tokens (interchangeable
with the API's ``attach``/``detach``), and a failed detach logged by the same logger
with the same message. With any other runtime context (``OTEL_PYTHON_CONTEXT``) they
are the API's own functions. ``with_span`` is ``trace.set_span_in_context`` without
its three calls (``set_value``, ``get_current`` and the runtime context's), and
``current_span`` is ``trace.get_current_span()`` without its four.

Where the runtime context keeps its variable is no part of the API. So at import the
variable is checked once against the runtime context (a context set through one is
what the other reads, and tokens of each reset the other) and ``with_span`` against
``set_span_in_context``; if anything differs or is missing (another API release), the
API's own functions are used and a WARNING says so once.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
from opentelemetry.trace.propagation import _SPAN_KEY

__all__ = ["attach", "current_span", "detach", "with_span"]

_logger = logging.getLogger(otel_context.__name__)  # where the API logs a failed detach
_said = logging.getLogger(__name__)


def _context_var(runtime: Any, default: type = ContextVarsRuntimeContext) -> Any:
    """The variable ``runtime`` keeps the current context in, when ``runtime`` is the
    API's ``default`` runtime context and the variable behaves as the runtime context
    does; None otherwise (said at WARNING when ``runtime`` is the default one)."""
    if type(runtime) is not default:  # another runtime context: the API's functions
        return None
    var = getattr(runtime, "_current_context", None)
    if not isinstance(var, contextvars.ContextVar):
        problem = "the runtime context keeps no context variable where it used to"
    elif not isinstance(_SPAN_KEY, str):
        problem = "the span's context key is not a string"
    else:
        try:
            problem = contextvars.copy_context().run(_differences, runtime, var)
        except Exception as exc:  # noqa: BLE001 - telemetry never breaks the app
            problem = f"{type(exc).__name__}: {exc}"
    if not problem:
        return var
    try:
        release = version("opentelemetry-api")
    except PackageNotFoundError:
        release = "(not installed)"
    _said.warning(
        "hoptrace: the fast way of attaching contexts does not work with "
        "opentelemetry-api %s (%s); the API's attach and detach are used instead",
        release,
        problem,
    )
    return None


def _differences(runtime: Any, var: contextvars.ContextVar[Any]) -> str:
    """What ``var`` does differently from ``runtime`` ("" for nothing); run in a copy
    of the current context, which it changes."""
    probe = otel_context.Context({"hoptrace.probe": 1})
    token = var.set(probe)
    if runtime.get_current() is not probe:
        return "a context set in its variable is not the current one"
    runtime.detach(token)
    if var.get() is probe:
        return "its detach does not reset the variable"
    token = runtime.attach(probe)
    if var.get() is not probe:
        return "its attach does not set the variable"
    var.reset(token)
    span = trace.NonRecordingSpan(trace.SpanContext(0x1F, 0x2F, is_remote=False))
    base = var.get()
    ours = otel_context.Context({**base, _SPAN_KEY: span})
    api = trace.set_span_in_context(span, base)
    # The span is under its key in the current context: what ``current_span`` reads.
    if type(ours) is not type(api) or ours != api or trace.get_current_span(ours) is not span:
        return "a span is kept in the context in another way"
    return ""


_var = _context_var(getattr(otel_context, "_RUNTIME_CONTEXT", None))

attach: Callable[[otel_context.Context], contextvars.Token[Any]]
detach: Callable[[contextvars.Token[Any]], None]
with_span: Callable[[trace.Span], otel_context.Context]
current_span: Callable[[], trace.Span]

if _var is None:
    attach, detach = otel_context.attach, otel_context.detach
    with_span = trace.set_span_in_context
    current_span = trace.get_current_span
else:
    attach = _var.set
    _reset = _var.reset
    _get = _var.get
    _Context = otel_context.Context

    def with_span(span: trace.Span) -> otel_context.Context:
        """The current context with ``span`` as its span, as
        ``trace.set_span_in_context(span)`` makes it."""
        return _Context({**_get(), _SPAN_KEY: span})

    _Span = trace.Span
    _INVALID_SPAN = trace.INVALID_SPAN
    #: The classes found to be spans: ``isinstance`` against the abstract ``Span``
    #: costs more than the rest of the lookup, and a class once a span stays one.
    _span_types: set[type] = set()

    def current_span() -> trace.Span:
        """The current context's span, as ``trace.get_current_span()`` reads it."""
        span = _get().get(_SPAN_KEY)
        if type(span) in _span_types:
            return span  # type: ignore[return-value]
        if span is None or not isinstance(span, _Span):
            return _INVALID_SPAN
        _span_types.add(type(span))
        return span

    def detach(token: contextvars.Token[Any]) -> None:
        """Restore the context ``token`` was made from; never raises (as the API)."""
        try:
            _reset(token)
        except Exception:
            _logger.exception("Failed to detach context")
