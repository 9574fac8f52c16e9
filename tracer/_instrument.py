"""Instrumentation helpers for FastAPI servers and httpx clients.

``instrument_fastapi(app, stage=...)`` wraps opentelemetry-instrumentation-fastapi with
streaming-friendly defaults (no per-chunk ``http send``/``http receive`` spans) and puts
``hoptrace.stage`` on the server span.

``instrument_httpx(client)`` builds on opentelemetry-instrumentation-httpx: its CLIENT
span propagates trace context to the next service, and hoptrace extends it so that it
covers the whole exchange, a streamed body included (the span ends when the body is
consumed or closed) and carries the first-token mark when the first body chunk
arrives. Neither helper records Authorization headers, API keys, prompts or
completions.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import httpx
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode, Tracer, TracerProvider

from tracer import attributes as attrs
from tracer._stage import mark_first_token, record_error

__all__ = ["SENSITIVE_HEADERS", "instrument_fastapi", "instrument_httpx"]

_logger = logging.getLogger(__name__)
#: Header values never recorded, even when header capture is switched on.
SENSITIVE_HEADERS = [
    "authorization",
    "proxy-authorization",
    "api-key",
    "x-api-key",
    "cookie",
    "set-cookie",
    ".*key.*",
    ".*token.*",
    ".*secret.*",
]
_EXT_KEY = "hoptrace.client_span"
_pending: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "hoptrace_pending_client_span", default=None
)
C = TypeVar("C", httpx.Client, httpx.AsyncClient)


def instrument_fastapi(app: Any, stage: str | None = None, **kwargs: Any) -> Any:
    """Instrument a FastAPI app; its SERVER spans get ``hoptrace.stage = stage``.

    Args:
        app: the FastAPI application.
        stage: the stage of this service's server span (e.g. ``gateway``); none when
            omitted.
        **kwargs: passed on to ``FastAPIInstrumentor.instrument_app`` (e.g.
            ``tracer_provider``, ``excluded_urls``); they win over hoptrace's defaults.

    Returns:
        The app.
    """
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    def server_request_hook(span: Span, scope: dict[str, Any]) -> None:
        if stage and span is not None and span.is_recording():
            span.set_attribute(attrs.STAGE, stage)

    options: dict[str, Any] = {
        "server_request_hook": server_request_hook,
        "exclude_spans": ["send", "receive"],
        "http_capture_headers_sanitize_fields": SENSITIVE_HEADERS,
    }
    options.update(kwargs)
    FastAPIInstrumentor.instrument_app(app, **options)
    return app


class _DeferredEndTracer:
    """A tracer whose ``start_as_current_span`` leaves ending to hoptrace's stream wrap.

    The httpx instrumentation ends its span when the response headers arrive. When its
    response hook claims the span for a streamed body, this tracer does not end it on
    exit; the wrapped response stream ends it when the body is consumed or closed.
    """

    def __init__(self, tracer: Tracer):
        self._tracer = tracer

    def start_span(self, *args: Any, **kwargs: Any) -> Span:
        return self._tracer.start_span(*args, **kwargs)

    @contextmanager
    def start_as_current_span(self, name: str, **kwargs: Any) -> Iterator[Span]:
        kwargs.pop("end_on_exit", None)
        record_exception = kwargs.pop("record_exception", True)
        set_status = kwargs.pop("set_status_on_exception", True)
        start_ns = time.time_ns()
        kwargs.setdefault("start_time", start_ns)
        span = self._tracer.start_span(name, **kwargs)
        holder: dict[str, Any] = {"claimed": False, "start_ns": start_ns, "span": span}
        pending_token = _pending.set(holder)
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            yield span
        except BaseException as exc:
            if record_exception and set_status:
                record_error(span, exc)
            elif record_exception and isinstance(exc, Exception):
                span.record_exception(exc)
            elif set_status and isinstance(exc, Exception):
                span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            holder["claimed"] = False
            raise
        finally:
            otel_context.detach(token)
            _pending.reset(pending_token)
            if not holder["claimed"]:
                span.end()


class _DeferredEndProvider:
    def __init__(self, provider: TracerProvider | None):
        self._provider = provider

    def get_tracer(self, *args: Any, **kwargs: Any) -> _DeferredEndTracer:
        provider = self._provider or trace.get_tracer_provider()
        return _DeferredEndTracer(provider.get_tracer(*args, **kwargs))


def _claim(extensions: Any) -> None:
    holder = _pending.get()
    if holder is None or not isinstance(extensions, dict):
        return
    holder["claimed"] = True
    extensions[_EXT_KEY] = holder


def _response_hook(span: Span, request: Any, response: Any) -> None:
    _claim(response.extensions)


async def _async_response_hook(span: Span, request: Any, response: Any) -> None:
    _claim(response.extensions)


class _TracedStream(httpx.SyncByteStream):
    def __init__(self, inner: Any, holder: dict[str, Any]):
        self._inner = inner
        self._holder = holder
        self._chunks = 0
        self._ended = False

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self._inner:
                if chunk and self._chunks == 0:
                    mark_first_token(self._holder["span"], self._holder["start_ns"])
                if chunk:
                    self._chunks += 1
                yield chunk
        except Exception as exc:
            record_error(self._holder["span"], exc)
            self._end()
            raise

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            span: Span = self._holder["span"]
            span.set_attribute(attrs.CHUNKS, self._chunks)
            span.end()

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._end()


class _TracedAsyncStream(httpx.AsyncByteStream):
    def __init__(self, inner: Any, holder: dict[str, Any]):
        self._inner = inner
        self._holder = holder
        self._chunks = 0
        self._ended = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                if chunk and self._chunks == 0:
                    mark_first_token(self._holder["span"], self._holder["start_ns"])
                if chunk:
                    self._chunks += 1
                yield chunk
        except Exception as exc:
            record_error(self._holder["span"], exc)
            self._end()
            raise

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            span: Span = self._holder["span"]
            span.set_attribute(attrs.CHUNKS, self._chunks)
            span.end()

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self._end()


def _wrap_response(response: Any) -> Any:
    if not isinstance(response, httpx.Response):
        return response
    holder = response.extensions.pop(_EXT_KEY, None)
    if holder is None:
        return response
    if isinstance(response.stream, httpx.AsyncByteStream):
        response.stream = _TracedAsyncStream(response.stream, holder)
    else:
        response.stream = _TracedStream(response.stream, holder)
    return response


def instrument_httpx(client: C, tracer_provider: TracerProvider | None = None) -> C:
    """Instrument a sync or async httpx client in place and return it.

    Its CLIENT spans propagate W3C trace context, cover the whole exchange (a streamed
    body included) and carry the first-token mark of the first body chunk. The client
    can be handed to other libraries, e.g. ``openai.OpenAI(http_client=client)``.

    Args:
        client: an ``httpx.Client`` or ``httpx.AsyncClient``.
        tracer_provider: the provider to use; the global one when omitted.

    Returns:
        The same client.

    Raises:
        TypeError: ``client`` is not an httpx client.
    """
    if not isinstance(client, (httpx.Client, httpx.AsyncClient)):
        raise TypeError(f"client must be an httpx.Client or httpx.AsyncClient, got {client!r}")
    if getattr(client, "_is_instrumented_by_opentelemetry", False):
        return client
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from wrapt import wrap_function_wrapper

    is_async = isinstance(client, httpx.AsyncClient)
    HTTPXClientInstrumentor.instrument_client(
        client,
        tracer_provider=_DeferredEndProvider(tracer_provider),  # type: ignore[arg-type]
        response_hook=_async_response_hook if is_async else _response_hook,
    )
    transports = [client._transport, *client._mounts.values()]
    for transport in transports:
        if transport is None:
            continue
        if is_async:

            async def async_outer(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
                return _wrap_response(await wrapped(*args, **kwargs))

            wrap_function_wrapper(transport, "handle_async_request", async_outer)
        else:

            def outer(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
                return _wrap_response(wrapped(*args, **kwargs))

            wrap_function_wrapper(transport, "handle_request", outer)
    return client
