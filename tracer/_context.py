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
its three calls (``set_value``, ``get_current`` and the runtime context's).
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
from opentelemetry.trace.propagation import _SPAN_KEY

__all__ = ["attach", "detach", "with_span"]

_logger = logging.getLogger(otel_context.__name__)  # where the API logs a failed detach


def _context_var() -> contextvars.ContextVar[Any] | None:
    """The API's context variable, when the runtime context is the default one."""
    runtime = getattr(otel_context, "_RUNTIME_CONTEXT", None)
    var = getattr(runtime, "_current_context", None)
    if type(runtime) is ContextVarsRuntimeContext and isinstance(var, contextvars.ContextVar):
        return var
    return None


_var = _context_var()

attach: Callable[[otel_context.Context], contextvars.Token[Any]]
detach: Callable[[contextvars.Token[Any]], None]
with_span: Callable[[trace.Span], otel_context.Context]

if _var is None or not isinstance(_SPAN_KEY, str):
    attach, detach = otel_context.attach, otel_context.detach
    with_span = trace.set_span_in_context
else:
    attach = _var.set
    _reset = _var.reset
    _get = _var.get
    _Context = otel_context.Context

    def with_span(span: trace.Span) -> otel_context.Context:
        """The current context with ``span`` as its span, as
        ``trace.set_span_in_context(span)`` makes it."""
        return _Context({**_get(), _SPAN_KEY: span})

    def detach(token: contextvars.Token[Any]) -> None:
        """Restore the context ``token`` was made from; never raises (as the API)."""
        try:
            _reset(token)
        except Exception:
            _logger.exception("Failed to detach context")
