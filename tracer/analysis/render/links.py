"""Links from a report to a trace in Jaeger's UI."""

from __future__ import annotations

__all__ = ["DEFAULT_JAEGER_URL", "trace_url"]

from urllib.parse import quote

from tracer._sources import DEFAULT_JAEGER_URL


def trace_url(jaeger_url: str, trace_id: str) -> str:
    """The page of ``trace_id`` in the Jaeger UI at ``jaeger_url``; an id that is not
    hex (a file may hold any string of 32 characters) is percent-encoded, so it stays
    one path segment."""
    return f"{jaeger_url.rstrip('/')}/trace/{quote(trace_id, safe='')}"
