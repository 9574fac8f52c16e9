"""Requests of an unsampled trace skip the server-span middleware.

A request whose ``traceparent`` says its trace was not sampled gets no server span
from hoptrace's parent-based samplers (``tracer.sampling.samplers``): the SDK would make a
non-recording span, and the ASGI instrumentation would still read the request's
headers and attributes, wrap its messages and start and end that span, about 0.1 ms
of CPU a request (docs/overhead.md). With one of those samplers installed, such a
request goes straight to the app inside the instrumentation, with the caller's
(unsampled) trace context current, so the calls it makes carry the same trace id, the
unsampled flag and the trace state on to the next service.

A request that starts a trace (no ``traceparent``), with the consistent probability
sampler of ``tracer.setup(sample_ratio=...)``, is decided here, on a trace id drawn as
the SDK draws them: dropped, it goes straight to the app with that unsampled trace's
context current; kept, the server span is made with that very trace id
(``tracer.sampling.samplers.PresetIdGenerator``), so the sampler decides the same.

Not skipped: sampled requests, other samplers, and any request when an SDK meter
provider is installed (the instrumentation's HTTP server metrics count every request).
"""

from __future__ import annotations

from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

__all__ = ["skip_unsampled_requests"]

_TRACEPARENT = b"traceparent"
_cache: tuple[object, object, bool] = (None, None, False)


def _skipping() -> bool:
    """hoptrace's parent-based sampler is installed and no SDK meter provider."""
    global _cache
    provider, meters = trace.get_tracer_provider(), metrics.get_meter_provider()
    if _cache[0] is provider and _cache[1] is meters:
        return _cache[2]
    from tracer.sampling.samplers import ConsistentProbabilitySampler, ParentBasedAlwaysOn

    sampler = getattr(provider, "sampler", None)
    ours = type(sampler) in (ConsistentProbabilitySampler, ParentBasedAlwaysOn)
    counting = type(meters).__module__.startswith("opentelemetry.sdk")
    _cache = (provider, meters, ours and not counting)
    return _cache[2]


def _traceparent(scope: dict[str, Any]) -> bytes | None:
    """The request's ``traceparent`` header, or None."""
    for name, value in scope.get("headers") or ():
        if name == _TRACEPARENT:
            return bytes(value)
    return None


def _unsampled(value: bytes) -> bool:
    """A well-formed ``traceparent`` whose sampled flag is off."""
    # 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>
    return len(value) == 55 and value[54:55] in b"02468ace"


def _root_decision() -> tuple[int, bool, Any] | None:
    """For a request that starts a trace: a trace id, whether the consistent sampler
    keeps it, and the id generator; None unless that sampler and
    :class:`~tracer.sampling.samplers.PresetIdGenerator` are installed (``tracer.setup``)."""
    from tracer.sampling.samplers import ConsistentProbabilitySampler, PresetIdGenerator

    provider = trace.get_tracer_provider()
    sampler, ids = getattr(provider, "sampler", None), getattr(provider, "id_generator", None)
    if type(sampler) is not ConsistentProbabilitySampler or type(ids) is not PresetIdGenerator:
        return None
    trace_id = RandomIdGenerator.generate_trace_id(ids)
    return trace_id, sampler.keeps(trace_id), ids


class _SkipUnsampled:
    """Sends an unsampled trace's requests past the server-span middleware ``app``
    (named so: FastAPI walks ``.app`` to find that middleware, and then makes no server
    span of its own)."""

    __slots__ = ("app", "bare")

    def __init__(self, traced: Any, bare: Any) -> None:
        self.app = traced
        self.bare = bare

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or not _skipping():
            await self.app(scope, receive, send)
            return
        parent = _traceparent(scope)
        if parent is None:  # the trace starts here: decide it now, on its own trace id
            decided = _root_decision()
            if decided is not None:
                trace_id, keep, ids = decided
                if keep:  # the server span gets this trace id, and the same decision
                    from tracer.sampling.samplers import preset_trace_id, reset_preset

                    preset = preset_trace_id(trace_id)
                    try:
                        await self.app(scope, receive, send)
                    finally:
                        reset_preset(preset)
                    return
                flags = TraceFlags(getattr(TraceFlags, "RANDOM_TRACE_ID", 0))
                dropped = SpanContext(trace_id, ids.generate_span_id(), False, flags)
                await self._bare_in(
                    trace.set_span_in_context(NonRecordingSpan(dropped)), scope, receive, send
                )
                return
        elif _unsampled(parent):
            from opentelemetry.instrumentation.asgi import asgi_getter

            extracted = propagate.extract(scope, getter=asgi_getter)  # baggage too
            ctx = trace.get_current_span(extracted).get_span_context()
            if ctx.is_valid and not ctx.trace_flags.sampled:
                await self._bare_in(extracted, scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _bare_in(self, ctx: Any, scope: dict[str, Any], receive: Any, send: Any) -> None:
        token = otel_context.attach(ctx)
        try:
            await self.bare(scope, receive, send)
        finally:
            otel_context.detach(token)


def skip_unsampled_requests(app: Any) -> None:
    """Make ``app`` (instrumented by ``FastAPIInstrumentor.instrument_app``) send an
    unsampled trace's requests past its server-span middleware (see the module
    docstring); a middleware stack of another layout is left as it is."""
    build = getattr(app, "build_middleware_stack", None)
    if build is None:
        return

    def build_middleware_stack() -> Any:
        stack = build()
        traced = getattr(stack, "app", None)
        bare = getattr(traced, "app", None)
        if type(traced).__name__ == "OpenTelemetryMiddleware" and bare is not None:
            stack.app = _SkipUnsampled(traced, bare)
        return stack

    app.build_middleware_stack = build_middleware_stack
