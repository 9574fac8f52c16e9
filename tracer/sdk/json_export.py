"""OTLP/HTTP with JSON bodies (``http/json``): the cheapest way for a Python service to
export its spans.

The SDK's protobuf exporter builds a protobuf message field by field in Python (about
80 us a span for a FastAPI server span, measured in docs/overhead.md's way); this one
builds the OTLP JSON mapping as plain dicts and lets orjson write it (about 16 us a
span), on the batch processor's thread, where every microsecond is taken from request
handling by the GIL. The body follows the OTLP/JSON encoding: hex ids, 64-bit
integers and nanosecond times as decimal strings, enum values as integers. The
OpenTelemetry Collector and ``hoptrace collect`` take it on ``/v1/traces``.

Like the SDK's exporters it never raises into the application: a failed export is
logged once per kind of failure and counted as a failure; retryable answers (429, 502,
503, 504, a lost connection) are retried with back-off within the export timeout,
honouring ``Retry-After``.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import httpx
import orjson
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from tracer.sdk.snapshot import (
    ATTRIBUTES,
    END_NS,
    KIND,
    NAME,
    PARENT_SPAN_ID,
    RESOURCE_KEY,
    SCOPE_NAME,
    SCOPE_VERSION,
    SPAN_ID,
    START_NS,
    STATUS_CODE,
    STATUS_MESSAGE,
    TRACE_ID,
    TRACE_STATE,
    Snapshot,
)

__all__ = ["JsonSpanExporter"]

_logger = logging.getLogger(__name__)
_RETRYABLE = {429, 502, 503, 504}


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, bytes):
        return {"bytesValue": value.hex()}
    if isinstance(value, Sequence):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": str(value)}


#: Encoded ``{"key": ..., "value": ...}`` pairs by (key, type, value): most attribute
#: values repeat from span to span (method, route, stage, model, status), and orjson
#: writes a shared dict as fast as a new one. Floats are left out: they are measured
#: durations, new every time, and would only churn the cache (and the garbage
#: collector's oldest generation, where long-lived entries end up). Cleared when it
#: grows past the limit.
_PAIR_CACHE: dict[tuple[str, type, Any], dict[str, Any]] = {}
_PAIR_CACHE_LIMIT = 4096
_CACHED_TYPES = frozenset((str, bool, int))


def _pair(key: str, value: Any) -> dict[str, Any]:
    kind = type(value)
    if kind not in _CACHED_TYPES:  # floats, lists, tuples, bytes: built each time
        return {"key": key, "value": _value(value)}
    cache_key = (key, kind, value)  # the type keeps True, 1 and 1.0 apart
    pair = _PAIR_CACHE.get(cache_key)
    if pair is None:
        if len(_PAIR_CACHE) >= _PAIR_CACHE_LIMIT:
            _PAIR_CACHE.clear()
        pair = _PAIR_CACHE[cache_key] = {"key": key, "value": _value(value)}
    return pair


def _items(attrs: Mapping[str, Any] | None) -> Any:
    """The attributes' items; the SDK's ``BoundedAttributes`` keeps a plain dict, whose
    items iterate without a Python-level ``__getitem__`` call per key (a third of the
    encoder's time with the ``Mapping`` protocol). Read only; any other mapping is
    iterated as a mapping."""
    if not attrs:
        return ()
    inner = getattr(attrs, "_dict", None)
    return inner.items() if type(inner) is dict else attrs.items()


def _span_items(span: ReadableSpan) -> Any:
    # ``ReadableSpan.attributes`` wraps the BoundedAttributes in a MappingProxyType,
    # which hides its dict: take the span's own reference when it has one.
    raw = getattr(span, "_attributes", None)
    return _items(raw) if raw is not None else _items(span.attributes)


def _attributes(attrs: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    return [_pair(k, v) for k, v in _items(attrs)]


def _span(span: ReadableSpan) -> dict[str, Any]:
    ctx = span.context
    out: dict[str, Any] = {
        "traceId": format(ctx.trace_id, "032x"),
        "spanId": format(ctx.span_id, "016x"),
        "name": span.name,
        "kind": span.kind.value + 1,  # the SDK counts from INTERNAL = 0, OTLP from 1
        "startTimeUnixNano": str(span.start_time or 0),
        "endTimeUnixNano": str(span.end_time or 0),
        "attributes": [_pair(k, v) for k, v in _span_items(span)],
    }
    parent = span.parent
    if parent is not None:
        out["parentSpanId"] = format(parent.span_id, "016x")
    if ctx.trace_state:
        out["traceState"] = ctx.trace_state.to_header()
    events = span.events
    if events:
        out["events"] = [
            {
                "name": e.name,
                "timeUnixNano": str(e.timestamp),
                "attributes": _attributes(e.attributes),
            }
            for e in events
        ]
    links = span.links
    if links:
        out["links"] = [
            {
                "traceId": format(link.context.trace_id, "032x"),
                "spanId": format(link.context.span_id, "016x"),
                "attributes": _attributes(link.attributes),
            }
            for link in links
        ]
    status = span.status
    if status.status_code.value:
        out["status"] = {"code": status.status_code.value}
        if status.description:
            out["status"]["message"] = status.description
    return out


def encode(spans: Sequence[ReadableSpan]) -> bytes:
    """An OTLP JSON ``ExportTraceServiceRequest`` of ``spans``, grouped by resource
    and instrumentation scope."""
    by_resource: dict[int, tuple[Any, dict[tuple[str, str | None], list[dict[str, Any]]]]] = {}
    for span in spans:
        resource = span.resource
        entry = by_resource.setdefault(id(resource), (resource, {}))
        scope = span.instrumentation_scope
        key = (scope.name, scope.version) if scope is not None else ("", None)
        entry[1].setdefault(key, []).append(_span(span))
    return _body(by_resource.values())


def _read_pairs(item: Snapshot, i: int) -> tuple[list[dict[str, Any]], int]:
    """The encoded attributes whose count is at ``item[i]`` (then the keys, then the
    values), and the index after them."""
    n = item[i]
    i += 1
    return [_pair(item[i + j], item[i + n + j]) for j in range(n)], i + 2 * n


def _snapshot_span(item: Snapshot) -> dict[str, Any]:
    attributes, i = _read_pairs(item, ATTRIBUTES)
    out: dict[str, Any] = {
        "traceId": format(item[TRACE_ID], "032x"),
        "spanId": format(item[SPAN_ID], "016x"),
        "name": item[NAME],
        "kind": item[KIND],
        "startTimeUnixNano": str(item[START_NS]),
        "endTimeUnixNano": str(item[END_NS]),
        "attributes": attributes,
    }
    parent_id = item[PARENT_SPAN_ID]
    if parent_id is not None:
        out["parentSpanId"] = format(parent_id, "016x")
    state = item[TRACE_STATE]
    if state is not None:
        out["traceState"] = state
    count = item[i]
    i += 1
    if count:
        events = out["events"] = []
        for _ in range(count):
            name, time_ns = item[i], item[i + 1]
            pairs, i = _read_pairs(item, i + 2)
            events.append({"name": name, "timeUnixNano": str(time_ns), "attributes": pairs})
    count = item[i]
    i += 1
    if count:
        links = out["links"] = []
        for _ in range(count):
            trace_id, span_id = item[i], item[i + 1]
            pairs, i = _read_pairs(item, i + 2)
            links.append(
                {
                    "traceId": format(trace_id, "032x"),
                    "spanId": format(span_id, "016x"),
                    "attributes": pairs,
                }
            )
    code = item[STATUS_CODE]
    if code:
        out["status"] = {"code": code}
        message = item[STATUS_MESSAGE]
        if message:
            out["status"]["message"] = message
    return out


def encode_snapshots(items: Sequence[Snapshot], resources: Mapping[int, Any]) -> bytes:
    """:func:`encode` for span snapshots (``tracer.sdk.batch``); ``resources`` maps each
    snapshot's resource key to its resource."""
    by_resource: dict[int, tuple[Any, dict[tuple[str, str | None], list[dict[str, Any]]]]] = {}
    for item in items:
        key = item[RESOURCE_KEY]
        entry = by_resource.get(key)
        if entry is None:
            entry = by_resource[key] = (resources[key], {})
        scope = (item[SCOPE_NAME], item[SCOPE_VERSION])
        entry[1].setdefault(scope, []).append(_snapshot_span(item))
    return _body(by_resource.values())


def _body(
    groups: Iterable[tuple[Any, dict[tuple[str, str | None], list[dict[str, Any]]]]],
) -> bytes:
    body = {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes(resource.attributes)},
                "scopeSpans": [
                    {
                        "scope": {"name": name, **({"version": version} if version else {})},
                        "spans": encoded,
                    }  # fmt: skip
                    for (name, version), encoded in scopes.items()
                ],
            }
            for resource, scopes in groups
        ]
    }
    return orjson.dumps(body)


class JsonSpanExporter(SpanExporter):
    """Export spans as OTLP/HTTP JSON to ``endpoint`` (the full ``.../v1/traces`` URL).

    Args:
        endpoint: the traces URL.
        headers: extra request headers (an ``authorization`` header, for instance).
        timeout_s: the whole export, retries included.
    """

    def __init__(
        self, endpoint: str, headers: Mapping[str, str] | None = None, timeout_s: float = 10.0
    ):
        if not endpoint.startswith(("http://", "https://")):
            raise ValueError(f"endpoint must be an http(s) URL, got {endpoint!r}")
        self._endpoint = endpoint
        self._headers = {"content-type": "application/json", **dict(headers or {})}
        self._timeout_s = timeout_s
        self._client = httpx.Client(timeout=timeout_s)
        self._shutdown = threading.Event()
        self._logged: set[str] = set()

    def _log_once(self, kind: str, message: str, *args: Any, exc_info: bool = False) -> None:
        if kind not in self._logged:
            self._logged.add(kind)
            _logger.warning(message, *args, exc_info=exc_info)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Send one batch; SUCCESS once the receiver accepted it."""
        if self._shutdown.is_set():
            return SpanExportResult.FAILURE
        try:
            body = encode(spans)
        except Exception:  # noqa: BLE001 - telemetry never breaks the app
            self._log_once("encode", "hoptrace: could not encode spans", exc_info=True)
            return SpanExportResult.FAILURE
        return self._send(body)

    def export_snapshots(
        self, items: Sequence[Snapshot], resources: Mapping[int, Any]
    ) -> SpanExportResult:
        """Send one batch of span snapshots (from ``tracer.sdk.batch``)."""
        if self._shutdown.is_set():
            return SpanExportResult.FAILURE
        try:
            body = encode_snapshots(items, resources)
        except Exception:  # noqa: BLE001 - telemetry never breaks the app
            self._log_once("encode", "hoptrace: could not encode spans", exc_info=True)
            return SpanExportResult.FAILURE
        return self._send(body)

    def _send(self, body: bytes) -> SpanExportResult:
        deadline = time.monotonic() + self._timeout_s
        delay = 0.5
        while True:
            wait: float | None = None
            try:
                resp = self._client.post(self._endpoint, content=body, headers=self._headers)
                if resp.status_code < 300:
                    return SpanExportResult.SUCCESS
                if resp.status_code not in _RETRYABLE:
                    self._log_once(
                        f"status{resp.status_code}",
                        "hoptrace: the span receiver at %s answered %s; spans dropped",
                        self._endpoint,
                        resp.status_code,
                    )
                    return SpanExportResult.FAILURE
                after = resp.headers.get("retry-after", "")
                wait = _retry_after(after)
            except httpx.HTTPError as exc:
                self._log_once(
                    type(exc).__name__,
                    "hoptrace: cannot send spans to %s (%s); retrying",
                    self._endpoint,
                    exc,
                )
            wait = wait if wait is not None else delay * (1 + random.random() / 2)
            if time.monotonic() + wait > deadline or self._shutdown.wait(wait):
                return SpanExportResult.FAILURE
            delay = min(delay * 2, 8.0)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Nothing is buffered here: the batch processor flushes."""
        return True

    def shutdown(self) -> None:
        """Stop retrying and close the connection."""
        self._shutdown.set()
        self._client.close()


def _retry_after(value: str) -> float | None:
    """Seconds in a ``Retry-After`` header given as a number, else None (an HTTP date,
    or anything unreadable: the exporter's own backoff applies)."""
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if 0 <= seconds < float("inf") else None
