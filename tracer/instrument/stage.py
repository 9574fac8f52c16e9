"""The ``stage`` decorator and context manager.

``stage(name, **attributes)`` marks a span with ``hoptrace.stage``. It works on sync
functions, coroutines, generators and async generators, and as a sync or async
context manager. It uses the global OpenTelemetry tracer provider at call time, so it
works inside any OpenTelemetry setup, not only after :func:`tracer.setup`.

Streams (generators) get the first-token mark (``docs/analysis.md``, time to first token): an event
``hoptrace.first_token`` and ``gen_ai.response.time_to_first_chunk`` (seconds from the
span's start) when the first item is yielded, and ``hoptrace.chunks``; the span ends
when the stream is exhausted, closed or fails.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import Token
from typing import Any, TypeVar

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import NoOpTracer, Span, Status, StatusCode, TraceFlags, Tracer
from opentelemetry.util.types import AttributeValue

from tracer import attributes as attrs
from tracer.instrument.context import attach, current_span, detach, with_span

__all__ = ["mark_first_token", "stage"]

_logger = logging.getLogger(__name__)


def _default_span_name(func: Callable[..., Any]) -> str:
    """``Class.method`` or ``function``; a closure drops its ``outer.<locals>.`` prefix."""
    name = str(getattr(func, "__qualname__", "") or getattr(func, "__name__", ""))
    return name.rpartition("<locals>.")[2]


_INSTRUMENTATION_NAME = "hoptrace"
F = TypeVar("F", bound=Callable[..., Any])

_tracer_cache: tuple[object, Tracer | None, bool] = (None, None, False)
_SAMPLED = TraceFlags.SAMPLED
_INVALID_SPAN = trace.INVALID_SPAN


def _current_tracer() -> Tracer | None:
    """The tracer of the current global provider, or None when tracing is a no-op, or
    when the provider's sampler is one of hoptrace's parent-based ones and the current
    span is an unsampled one: its children would be dropped too, so a stage under it
    makes no span at all (the unsampled requests of a sampled service cost next to
    nothing; the trace context stays the parent's, unsampled)."""
    global _tracer_cache
    provider = trace.get_tracer_provider()
    cached_provider, cached, parent_based = _tracer_cache
    if provider is not cached_provider:
        cached = provider.get_tracer(_INSTRUMENTATION_NAME)
        if isinstance(cached, NoOpTracer) or isinstance(provider, trace.NoOpTracerProvider):
            cached = None
        from tracer.sampling.samplers import ConsistentProbabilitySampler, ParentBasedAlwaysOn

        sampler = getattr(provider, "sampler", None)
        parent_based = type(sampler) in (ConsistentProbabilitySampler, ParentBasedAlwaysOn)
        _tracer_cache = (provider, cached, parent_based)
    if parent_based and cached is not None:
        span = current_span()
        if span is not _INVALID_SPAN:
            parent = span.get_span_context()
            if not parent.trace_flags & _SAMPLED and parent.is_valid:
                return None
    return cached


def record_error(span: Span, exc: BaseException) -> None:
    """Record ``exc`` on ``span``: an exception event and ERROR status for a failure, the
    ``hoptrace.cancelled`` attribute for a cancellation; never raises."""
    try:
        if isinstance(exc, Exception):
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        else:  # cancellation, GeneratorExit, KeyboardInterrupt: not a failure of the code
            span.set_attribute(attrs.CANCELLED, type(exc).__name__)
    except Exception:  # telemetry never breaks the app
        _logger.debug("could not record an exception on span", exc_info=True)


def mark_first_token(span: Span, start_ns: int, now_ns: int | None = None) -> None:
    """Write the first-token mark on ``span``: the event and the GenAI attribute.

    Args:
        span: the span that streams.
        start_ns: the span's start in Unix nanoseconds.
        now_ns: the moment of the first token; now when omitted.
    """
    now = time.time_ns() if now_ns is None else now_ns
    try:
        span.add_event(attrs.FIRST_TOKEN_EVENT, timestamp=now)
        span.set_attribute(attrs.GEN_AI_TIME_TO_FIRST_CHUNK, max(now - start_ns, 0) / 1e9)
    except Exception:
        _logger.debug("could not mark the first token", exc_info=True)


def _start(
    tracer: Tracer,
    name: str,
    attributes: dict[str, AttributeValue],
    start_ns: int | None = None,
) -> tuple[Span, Context, Token[Context]]:
    """Start a stage's span and attach its context, so that spans started by the work
    are its children: the span, its context and the token that detaches it.

    :func:`_start` and :func:`_end` are the one sequence every form of :class:`stage`
    runs. A function, a coroutine or a block is one step of work between them; a stream
    is one step per item it is asked for, its context attached again around each.
    (Plain functions, not a context manager object: a Python-level ``with`` costs more
    per call than the two calls do.)
    """
    span = tracer.start_span(name, attributes=attributes, start_time=start_ns)
    context = with_span(span)
    return span, context, attach(context)


def _end(
    span: Span,
    token: Token[Context] | None,
    exc: BaseException | None = None,
    chunks: int | None = None,
) -> None:
    """Detach the span's context (``token``; None when a stream's last step did), record
    ``exc`` when given (a failure, or a cancellation) and a stream's ``chunks``, and end
    the span."""
    if token is not None:
        detach(token)
    if exc is not None:
        record_error(span, exc)
    if chunks is not None:
        span.set_attribute(attrs.CHUNKS, chunks)
    span.end()


#: The ``stage`` blocks open in this context: (owner, span, token), innermost last.
_open_blocks: contextvars.ContextVar[tuple[tuple[Any, Span, Token[Context] | None], ...]] = (
    contextvars.ContextVar("hoptrace_open_stage_blocks", default=())
)


class stage:  # noqa: N801 - used like a function: @stage("auth")
    """Mark a function, coroutine, stream or block as one stage of a request.

    Args:
        name: the stage name (``client``, ``gateway``, ``auth``, ``context``,
            ``inference``, ``postprocess``, ``return`` or a custom one).
        span_name: the span's name; the decorated function's qualified name, or the
            stage name for a block, when omitted.
        **attributes: extra span attributes (strings, numbers, booleans or lists).

    Raises:
        ValueError: ``name`` is empty or not a string.

    As a context manager it yields the span, so the block can add attributes.
    """

    __slots__ = ("_attributes", "_name", "_span_name")

    def __init__(self, name: str, span_name: str | None = None, **attributes: AttributeValue):
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"stage name must be a non-empty string, got {name!r}")
        self._name = name
        self._span_name = span_name
        self._attributes: dict[str, AttributeValue] = {attrs.STAGE: name, **attributes}

    @property
    def name(self) -> str:
        """The stage name."""
        return self._name

    # -- decorator -------------------------------------------------------------------
    def __call__(self, func: F) -> F:
        span_name = str(self._span_name or _default_span_name(func) or self._name)
        attributes = self._attributes

        if inspect.isasyncgenfunction(func):
            return self._wrap_async_gen(func, span_name)  # type: ignore[return-value]
        if inspect.isgeneratorfunction(func):
            return self._wrap_gen(func, span_name)  # type: ignore[return-value]
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                tracer = _current_tracer()
                if tracer is None:
                    return await func(*args, **kwargs)
                span, _, token = _start(tracer, span_name, attributes)
                try:
                    result = await func(*args, **kwargs)
                except BaseException as exc:
                    _end(span, token, exc)
                    raise
                _end(span, token)
                return result

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            tracer = _current_tracer()
            if tracer is None:
                return func(*args, **kwargs)
            span, _, token = _start(tracer, span_name, attributes)
            try:
                result = func(*args, **kwargs)
            except BaseException as exc:
                _end(span, token, exc)
                raise
            _end(span, token)
            return result

        return wrapper  # type: ignore[return-value]

    def _wrap_gen(self, func: Callable[..., Iterator[Any]], span_name: str) -> Callable[..., Any]:
        attributes = self._attributes

        @functools.wraps(func)
        def gen_wrapper(*args: Any, **kwargs: Any) -> Iterator[Any]:
            tracer = _current_tracer()
            if tracer is None:
                return (yield from func(*args, **kwargs))
            start_ns = time.time_ns()
            span, context, token = _start(tracer, span_name, attributes, start_ns)
            chunks = 0
            failure: BaseException | None = None
            gen: Any = None
            try:
                try:
                    gen = func(*args, **kwargs)
                    item = next(gen)
                finally:
                    detach(token)
                while True:
                    if chunks == 0:
                        mark_first_token(span, start_ns)
                    chunks += 1
                    try:
                        sent = yield item
                    except GeneratorExit:
                        span.set_attribute(attrs.STREAM_CLOSED_EARLY, True)
                        gen.close()
                        raise
                    except BaseException as thrown:  # forwarded, as ``yield from`` does
                        token = attach(context)
                        try:
                            item = gen.throw(thrown)
                        finally:
                            detach(token)
                        continue
                    token = attach(context)
                    try:
                        item = gen.send(sent)
                    finally:
                        detach(token)
            except StopIteration as stop:
                return stop.value
            except GeneratorExit:
                raise
            except BaseException as exc:
                failure = exc
                raise
            finally:
                _end(span, None, failure, chunks)

        return gen_wrapper

    def _wrap_async_gen(
        self, func: Callable[..., AsyncIterator[Any]], span_name: str
    ) -> Callable[..., Any]:
        attributes = self._attributes

        @functools.wraps(func)
        async def agen_wrapper(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            tracer = _current_tracer()
            if tracer is None:
                async for item in func(*args, **kwargs):
                    yield item
                return
            start_ns = time.time_ns()
            span, context, token = _start(tracer, span_name, attributes, start_ns)
            chunks = 0
            failure: BaseException | None = None
            agen: Any = None
            try:
                try:
                    agen = func(*args, **kwargs)
                    item = await agen.__anext__()
                finally:
                    detach(token)
                while True:
                    if chunks == 0:
                        mark_first_token(span, start_ns)
                    chunks += 1
                    try:
                        sent = yield item
                    except GeneratorExit:
                        span.set_attribute(attrs.STREAM_CLOSED_EARLY, True)
                        await agen.aclose()
                        raise
                    except BaseException as thrown:
                        token = attach(context)
                        try:
                            item = await agen.athrow(thrown)
                        finally:
                            detach(token)
                        continue
                    token = attach(context)
                    try:
                        item = await agen.asend(sent)
                    finally:
                        detach(token)
            except StopAsyncIteration:
                return
            except GeneratorExit:
                raise
            except BaseException as exc:
                failure = exc
                raise
            finally:
                _end(span, None, failure, chunks)

        return agen_wrapper

    # -- context manager --------------------------------------------------------------
    # The open blocks live in a context variable, not on the instance: one ``stage``
    # object entered by two tasks (or threads) at once keeps one entry per task, and
    # each exit finds its own span.
    def __enter__(self) -> Span:
        tracer = _current_tracer()
        if tracer is None:
            span: Span = trace.INVALID_SPAN
            _open_blocks.set((*_open_blocks.get(), (self, span, None)))
            return span
        span, _, token = _start(tracer, self._span_name or self._name, self._attributes)
        _open_blocks.set((*_open_blocks.get(), (self, span, token)))
        return span

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        blocks = _open_blocks.get()
        for i in range(len(blocks) - 1, -1, -1):
            if blocks[i][0] is self:
                _, span, token = blocks[i]
                _open_blocks.set(blocks[:i] + blocks[i + 1 :])
                break
        else:  # exited in another context than entered: nothing of ours to end
            return
        if token is not None:  # None: no span was made (tracing off, or unsampled)
            _end(span, token, exc)

    async def __aenter__(self) -> Span:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.__exit__(exc_type, exc, tb)
