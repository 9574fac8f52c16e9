"""Instrumentation helpers for FastAPI servers and httpx (or httpx2) clients.

``instrument_fastapi(app, stage=...)`` wraps opentelemetry-instrumentation-fastapi with
streaming-friendly defaults (no per-chunk ``http send``/``http receive`` spans) and puts
``hoptrace.stage`` on the server span.

``instrument_httpx(client)`` builds on opentelemetry-instrumentation-httpx: its CLIENT
span propagates trace context to the next service, and hoptrace extends it so that it
covers the whole exchange, a streamed body included (the span ends when the body is
consumed or closed) and carries the first-token mark when the first body chunk
arrives. It takes ``httpx`` clients and ``httpx2`` ones (the openai SDK 3.x default,
e.g. ``openai.DefaultHttpxClient()``) alike. Neither helper records Authorization
headers, API keys, prompts or completions.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode, Tracer, TracerProvider

from tracer import attributes as attrs
from tracer.instrument import context as _context
from tracer.instrument.stage import mark_first_token, record_error

if TYPE_CHECKING:
    import httpx2  # optional: imported only for type checking

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
C = TypeVar("C", httpx.Client, httpx.AsyncClient, "httpx2.Client", "httpx2.AsyncClient")


def instrument_fastapi(
    app: Any, stage: str | None = None, *, record_cpu: bool = True, **kwargs: Any
) -> Any:
    """Instrument a FastAPI app; its SERVER spans get ``hoptrace.stage = stage``.

    Args:
        app: the FastAPI application.
        stage: the stage of this service's server span (e.g. ``gateway``); none when
            omitted.
        record_cpu: put the load attributes on the server span: the process's CPU
            time during the request and its cumulative CPU at the request's end
            (``hoptrace.process.cpu_ns``, ``hoptrace.process.cpu_total_ns``), its
            instance, host and cores (``tracer/instrument/load.py``). It adds an ASGI
            middleware, so only before the app serves its first request; after that,
            a warning and spans without them.
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
        "tracer_provider": _OnceSetProvider(kwargs.pop("tracer_provider", None)),
        "server_request_hook": server_request_hook,
        "exclude_spans": ["send", "receive"],
        "http_capture_headers_sanitize_fields": SENSITIVE_HEADERS,
    }
    options.update(kwargs)
    if record_cpu:
        from tracer.instrument.load import CpuMiddleware

        try:
            app.add_middleware(CpuMiddleware)
        except RuntimeError:  # Starlette: the app already started; trace it without
            _logger.warning("the app is already serving: its server spans carry no CPU")
    FastAPIInstrumentor.instrument_app(app, **options)
    from tracer.sampling.unsampled import skip_unsampled_requests

    skip_unsampled_requests(app)  # an unsampled trace's requests make no server span
    return app


# The SDK's samplers and hoptrace's faster copy of its default (tracer/sampling/samplers.py).
_SDK_SAMPLERS = ("opentelemetry.sdk.trace.sampling", "tracer.sampling.samplers")


class _OnceSetTracer:
    """The ASGI instrumentation's tracer, minus one redundant step.

    The instrumentation starts the server span with its request attributes and, as soon
    as the span records, sets every one of them again, one call each (0.66b0). Started
    without them, the span gets each once, from that loop: the same attributes in the
    same order, for 40% less of the span's attribute work. Only with the SDK's own
    samplers, none of which reads the attributes it is shown; any other sampler sees
    them as before. A test compares the two spans (tests/tracer/test_server_span.py).
    A span processor's ``on_start`` sees the server span before those attributes
    arrive (the SDK's own processors do nothing there).
    """

    def __init__(self, tracer: Tracer):
        self._tracer = tracer
        sampler = getattr(tracer, "sampler", None)
        self._strip = type(sampler).__module__ in _SDK_SAMPLERS

    def start_span(self, name: str, context: Any = None, *args: Any, **kwargs: Any) -> Span:
        if self._strip and kwargs.get("attributes"):
            kwargs["attributes"] = None
        return self._tracer.start_span(name, context, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tracer, name)


class _OnceSetProvider:
    def __init__(self, provider: TracerProvider | None):
        self._provider = provider

    def get_tracer(self, *args: Any, **kwargs: Any) -> _OnceSetTracer:
        provider = self._provider or trace.get_tracer_provider()
        return _OnceSetTracer(provider.get_tracer(*args, **kwargs))


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

    def start_as_current_span(self, name: str, **kwargs: Any) -> _CurrentUntilClaimed:
        """A context manager: the span starts on entry and is current inside."""
        return _CurrentUntilClaimed(self._tracer, name, kwargs)


class _CurrentUntilClaimed:
    """``start_as_current_span`` of :class:`_DeferredEndTracer`, as a class rather than
    a ``@contextmanager`` generator (a few thousand instructions a request less):
    on entry the span starts and becomes current; on exit an exception is recorded
    and the span ends unless the response hook claimed it for a streamed body."""

    __slots__ = (
        "_holder",
        "_kwargs",
        "_name",
        "_pending_token",
        "_record_exception",
        "_set_status",
        "_token",
        "_tracer",
    )

    def __init__(self, tracer: Tracer, name: str, kwargs: dict[str, Any]):
        self._tracer = tracer
        self._name = name
        kwargs.pop("end_on_exit", None)
        self._record_exception = kwargs.pop("record_exception", True)
        self._set_status = kwargs.pop("set_status_on_exception", True)
        self._kwargs = kwargs

    def __enter__(self) -> Span:
        kwargs = self._kwargs
        start_ns = time.time_ns()
        kwargs.setdefault("start_time", start_ns)
        span = self._tracer.start_span(self._name, **kwargs)
        self._holder: dict[str, Any] = {"claimed": False, "start_ns": start_ns, "span": span}
        self._pending_token = _pending.set(self._holder)
        self._token = _context.attach(_context.with_span(span))
        return span

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        holder = self._holder
        span: Span = holder["span"]
        try:
            if exc is not None:
                record_exception, set_status = self._record_exception, self._set_status
                if record_exception and set_status:
                    record_error(span, exc)
                elif record_exception and isinstance(exc, Exception):
                    span.record_exception(exc)
                elif set_status and isinstance(exc, Exception):
                    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                holder["claimed"] = False
        finally:
            _context.detach(self._token)
            _pending.reset(self._pending_token)
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


class _TracedStream:
    def __init__(self, inner: Any, holder: dict[str, Any]):
        self._inner = inner
        self._holder = holder
        self._chunks = 0
        self._ended = False

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self._inner:
                if chunk and self._chunks == 0 and self._holder["streamed"]:
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
            _end_span(self._holder, self._chunks)

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._end()


class _TracedAsyncStream:
    def __init__(self, inner: Any, holder: dict[str, Any]):
        self._inner = inner
        self._holder = holder
        self._chunks = 0
        self._ended = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                if chunk and self._chunks == 0 and self._holder["streamed"]:
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
            _end_span(self._holder, self._chunks)

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self._end()


#: Media types of a streamed body (server-sent events, JSON lines).
_STREAM_TYPES = frozenset(
    {"text/event-stream", "application/x-ndjson", "application/jsonl", "application/json-seq"}
)


def _streamed(headers: Any) -> bool:
    """Whether a response streams its body: a stream's media type, or no length given
    (chunked). A body of known length that is not a stream (a JSON answer) has no first
    token: its first chunk comes with its end, and marking it would report the whole
    exchange as the time to first token."""
    media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return media in _STREAM_TYPES or "content-length" not in headers


def _end_span(holder: dict[str, Any], chunks: int) -> None:
    """End a client span with the number of body chunks its response had."""
    span: Span = holder["span"]
    span.set_attribute(attrs.CHUNKS, chunks)
    span.end()


@functools.cache
def _stream_types(module: ModuleType) -> tuple[type, type]:
    """The traced streams as ``module``'s byte streams: httpx and httpx2 check the type."""
    return (
        type("_TracedStream", (_TracedStream, module.SyncByteStream), {}),
        type("_TracedAsyncStream", (_TracedAsyncStream, module.AsyncByteStream), {}),
    )


def _wrap_response(response: Any, module: ModuleType, is_async: bool) -> Any:
    if not isinstance(response, module.Response):
        return response
    holder = response.extensions.pop(_EXT_KEY, None)
    if holder is None:
        return response
    holder["streamed"] = _streamed(response.headers)
    if getattr(response, "is_closed", False):
        # The body was read with the headers (a response built in memory, as mock
        # transports give): no stream will end the span, so it ends here.
        chunks = 1 if response.content else 0
        if chunks and holder["streamed"]:
            mark_first_token(holder["span"], holder["start_ns"])
        _end_span(holder, chunks)
        return response
    traced, traced_async = _stream_types(module)
    # By the client, not the stream: httpx.ByteStream (mock transports) is both kinds.
    if is_async:
        response.stream = traced_async(response.stream, holder)
    else:
        response.stream = traced(response.stream, holder)
    return response


class _LazyHeaders(Mapping[str, list[str]]):
    """The instrumentation's normalised headers, computed only when something reads
    them. ``get_custom_header_attributes`` reads them only when header capture is on;
    otherwise turning every header into a list (with comma splitting) was a quarter of
    the httpx instrumentation's time, on every request and response."""

    __slots__ = ("_args", "_done", "_normalize")

    def __init__(self, normalize: Any, args: tuple[Any, ...]):
        self._normalize = normalize
        self._args = args
        self._done: dict[str, list[str]] | None = None

    def _get(self) -> dict[str, list[str]]:
        if self._done is None:
            self._done = self._normalize(*self._args)
        return self._done

    def __bool__(self) -> bool:  # as the dict would be: no headers, no entries
        return bool(self._args[0])

    def __getitem__(self, key: str) -> list[str]:
        return self._get()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


def _lazy_header_normalisation(otel_httpx: ModuleType) -> None:
    """Make opentelemetry-instrumentation-httpx normalise headers only when it uses
    them (once per process; the spans and their attributes stay the same)."""
    normalize = getattr(otel_httpx, "_normalize_headers", None)
    if normalize is None or getattr(normalize, "_hoptrace_lazy", False):
        return

    def lazy_normalize_headers(*args: Any) -> Mapping[str, list[str]]:
        return _LazyHeaders(normalize, args)

    lazy_normalize_headers._hoptrace_lazy = True  # type: ignore[attr-defined]
    setattr(otel_httpx, "_normalize_headers", lazy_normalize_headers)  # noqa: B010


def _library(client: Any) -> ModuleType | None:
    """``httpx`` or ``httpx2``, whichever ``client`` is a client of; None for neither."""
    # An httpx2 client exists only once httpx2 is imported: no import here.
    for module in (httpx, sys.modules.get("httpx2")):
        if module is not None and isinstance(client, (module.Client, module.AsyncClient)):
            return module
    return None


def instrument_httpx(client: C, tracer_provider: TracerProvider | None = None) -> C:
    """Instrument a sync or async httpx or httpx2 client in place and return it.

    Its CLIENT spans propagate W3C trace context, cover the whole exchange (a streamed
    body included) and carry the first-token mark of the first body chunk of a streamed
    response (``text/event-stream``, JSON lines, or a body of no stated length; a JSON
    answer of known length has no first token). The client
    can be handed to other libraries, e.g. ``openai.OpenAI(http_client=client)``.

    Args:
        client: an ``httpx.Client``, ``httpx.AsyncClient``, ``httpx2.Client`` or
            ``httpx2.AsyncClient``, subclasses included (``openai.DefaultHttpxClient``).
        tracer_provider: the provider to use; the global one when omitted.

    Returns:
        The same client.

    Raises:
        TypeError: ``client`` is not an httpx or httpx2 client.
        ImportError: an httpx2 client, with opentelemetry-instrumentation-httpx older
            than 0.65b0.
    """
    module = _library(client)
    if module is None:
        raise TypeError(
            "client must be an httpx.Client, httpx.AsyncClient, httpx2.Client or "
            f"httpx2.AsyncClient, got {client!r}"
        )
    if getattr(client, "_is_instrumented_by_opentelemetry", False):
        return client
    from opentelemetry.instrumentation import httpx as otel_httpx
    from wrapt import wrap_function_wrapper

    name = "HTTPXClientInstrumentor" if module is httpx else "HTTPX2ClientInstrumentor"
    instrumentor = getattr(otel_httpx, name, None)
    if instrumentor is None:  # HTTPX2ClientInstrumentor came in 0.65b0
        raise ImportError("httpx2 clients need opentelemetry-instrumentation-httpx>=0.65b0")
    _lazy_header_normalisation(otel_httpx)
    is_async = isinstance(client, module.AsyncClient)
    instrumentor.instrument_client(
        client,  # type: ignore[arg-type]  # typed for httpx, works for httpx2 too
        tracer_provider=_DeferredEndProvider(tracer_provider),  # type: ignore[arg-type]
        response_hook=_async_response_hook if is_async else _response_hook,
    )
    transports = [client._transport, *client._mounts.values()]
    for transport in transports:
        if transport is None:
            continue
        if is_async:

            async def async_outer(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
                return _wrap_response(await wrapped(*args, **kwargs), module, True)

            wrap_function_wrapper(transport, "handle_async_request", async_outer)
        else:

            def outer(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
                return _wrap_response(wrapped(*args, **kwargs), module, False)

            wrap_function_wrapper(transport, "handle_request", outer)
    return client
