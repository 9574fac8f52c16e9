"""Small OTLP JSON batches for the hostile-input tests, one span at a time."""

from __future__ import annotations

from typing import Any

T0 = 1_700_000_000_000_000_000
TRACE = "ab" * 16


def span(
    span_id: str,
    parent: str | None = None,
    attributes: list[dict[str, Any]] | None = None,
    start: int | str = T0,
    end: int | str = T0 + 5_000_000,
    name: str = "op",
    trace_id: str = TRACE,
) -> dict[str, Any]:
    """One OTLP JSON span."""
    out: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": name,
        "kind": 2,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(end),
        "attributes": attributes or [],
    }
    if parent:
        out["parentSpanId"] = parent
    return out


def batch(spans: list[dict[str, Any]], service: str = "svc") -> dict[str, Any]:
    """An OTLP JSON export request of ``spans`` from ``service``."""
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}


def double(key: str, value: Any) -> dict[str, Any]:
    """An attribute with a ``doubleValue`` (a float, or text such as ``"Infinity"``)."""
    return {"key": key, "value": {"doubleValue": value}}


def trio(bad: dict[str, Any] | None = None, trace_id: str = TRACE) -> dict[str, Any]:
    """A root and two children in stage ``inference``; the second child carries the
    attribute ``bad``."""
    stage = {"key": "hoptrace.stage", "value": {"stringValue": "inference"}}
    return batch(
        [
            span("1" * 16, None, [stage], trace_id=trace_id),
            span("2" * 16, "1" * 16, [stage], trace_id=trace_id),
            span("3" * 16, "1" * 16, [stage, bad] if bad else [stage], trace_id=trace_id),
        ]
    )
