"""A span made by the installed OpenTelemetry SDK, for checking hoptrace's fast paths.

hoptrace reads some of the SDK's private fields on its hot paths (``tracer.sdk.batch``,
``tracer.instrument.context``) because that is cheaper than the public properties. Those fields
are no part of the SDK's API and may change in any release, so each fast path is
compared once with the public way on a span that this SDK made, and is used only when
both give the same result.
"""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, requires, version

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

__all__ = ["installed_version", "probe_span", "supported_range"]


class _Keep(SpanProcessor):
    """Keeps the spans the SDK hands ``on_end``."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def probe_span() -> ReadableSpan | None:
    """An ended span as the SDK hands it to a processor's ``on_end``: a CLIENT span with
    a remote parent, attributes of three types, an event, a link and an error status.

    Made by a provider of its own (not the global one, nothing exported); None when
    the SDK is disabled (``OTEL_SDK_DISABLED``), which then hands processors no spans.
    """
    keep = _Keep()
    provider = TracerProvider(
        sampler=ALWAYS_ON, resource=Resource.get_empty(), shutdown_on_exit=False
    )
    provider.add_span_processor(keep)
    sampled = TraceFlags(TraceFlags.SAMPLED)
    parent = SpanContext(0x1F, 0x2F, is_remote=True, trace_flags=sampled)
    linked = SpanContext(0x3F, 0x4F, is_remote=True, trace_flags=sampled)
    span = provider.get_tracer("hoptrace.probe", "1.0").start_span(
        "probe",
        context=trace.set_span_in_context(trace.NonRecordingSpan(parent)),
        kind=SpanKind.CLIENT,
        attributes={"probe.str": "v", "probe.int": 7, "probe.list": ["a", "b"]},
        links=[Link(linked, {"probe.link": True})],
        start_time=1_000,
    )
    span.add_event("probe.event", {"probe.float": 1.5}, timestamp=2_000)
    span.set_status(Status(StatusCode.ERROR, "probe"))
    span.end(end_time=3_000)
    provider.shutdown()
    return keep.spans[0] if keep.spans else None


def installed_version(distribution: str) -> str:
    """The installed version of ``distribution`` (``opentelemetry-sdk``), for messages."""
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "(not installed)"


def supported_range(distribution: str) -> str:
    """The versions of ``distribution`` hoptrace is tested with, as its package states
    them (``>=1.44,<1.46``); "" when that cannot be read."""
    try:
        needs = requires("hoptrace") or []
    except PackageNotFoundError:
        return ""
    for need in needs:
        match = re.fullmatch(rf"{re.escape(distribution)}\s*([^;\[]*)", need.strip())
        if match:  # the lower bound first, as people write it
            bounds = [b.strip() for b in match.group(1).split(",") if b.strip()]
            return ",".join(sorted(bounds, key=lambda b: not b.startswith(">")))
    return ""
