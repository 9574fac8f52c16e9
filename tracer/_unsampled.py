"""Requests of an unsampled trace skip the server-span middleware.

A request whose ``traceparent`` says its trace was not sampled gets no server span
from hoptrace's parent-based samplers (``tracer._sampling``): the SDK would make a
non-recording span, and the ASGI instrumentation would still read the request's
headers and attributes, wrap its messages and start and end that span, about 0.1 ms
of CPU a request (docs/overhead.md). With one of those samplers installed, such a
request goes straight to the app inside the instrumentation, with the caller's
(unsampled) trace context current, so the calls it makes carry the same trace id, the
unsampled flag and the trace state on to the next service.

Not skipped: requests without a valid ``traceparent`` (the root of a trace, which the
sampler decides), sampled ones, any other sampler, and any request when an SDK meter
provider is installed (the instrumentation's HTTP server metrics count every request).
"""

from __future__ import annotations

from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace

__all__ = ["skip_unsampled_requests"]

_TRACEPARENT = b"traceparent"
_cache: tuple[object, object, bool] = (None, None, False)


def _skipping() -> bool:
    """hoptrace's parent-based sampler is installed and no SDK meter provider."""
    global _cache
    provider, meters = trace.get_tracer_provider(), metrics.get_meter_provider()
    if _cache[0] is provider and _cache[1] is meters:
        return _cache[2]
    from tracer._sampling import ConsistentProbabilitySampler, ParentBasedAlwaysOn

    sampler = getattr(provider, "sampler", None)
    ours = type(sampler) in (ConsistentProbabilitySampler, ParentBasedAlwaysOn)
    counting = type(meters).__module__.startswith("opentelemetry.sdk")
    _cache = (provider, meters, ours and not counting)
    return _cache[2]


def _unsampled(scope: dict[str, Any]) -> bool:
    """The request's ``traceparent`` is well formed and its sampled flag is off."""
    for name, value in scope.get("headers") or ():
        if name == _TRACEPARENT:
            # 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>
            return len(value) == 55 and value[54:55] in b"02468ace"
    return False


class _SkipUnsampled:
    """Sends an unsampled trace's requests past the server-span middleware ``app``
    (named so: FastAPI walks ``.app`` to find that middleware, and then makes no server
    span of its own)."""

    __slots__ = ("app", "bare")

    def __init__(self, traced: Any, bare: Any) -> None:
        self.app = traced
        self.bare = bare

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") == "http" and _unsampled(scope) and _skipping():
            from opentelemetry.instrumentation.asgi import asgi_getter

            extracted = propagate.extract(scope, getter=asgi_getter)  # baggage too
            ctx = trace.get_current_span(extracted).get_span_context()
            if ctx.is_valid and not ctx.trace_flags.sampled:
                token = otel_context.attach(extracted)
                try:
                    await self.bare(scope, receive, send)
                finally:
                    otel_context.detach(token)
                return
        await self.app(scope, receive, send)


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
