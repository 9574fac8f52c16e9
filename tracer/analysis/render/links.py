"""Links from a report to a trace in Jaeger's UI."""

from __future__ import annotations

__all__ = ["DEFAULT_JAEGER_URL", "trace_url"]

from tracer._sources import DEFAULT_JAEGER_URL


def trace_url(jaeger_url: str, trace_id: str) -> str:
    """The page of ``trace_id`` in the Jaeger UI at ``jaeger_url``."""
    return f"{jaeger_url.rstrip('/')}/trace/{trace_id}"
