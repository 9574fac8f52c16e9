"""Small OTLP bodies, good and bad, in both encodings, built span by span."""

from __future__ import annotations

import gzip
import os
from typing import Any

import orjson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

PROTO = {"content-type": "application/x-protobuf"}
JSON = {"content-type": "application/json"}
GZIP = {"content-encoding": "gzip"}
T0 = 1_700_000_000_000_000_000


def new_trace_id() -> bytes:
    return os.urandom(16)


def proto_request(
    n: int = 3, trace_id: bytes | None = None, service: str = "svc", pad_bytes: int = 0
) -> Any:
    """A request of ``n`` good spans of one trace (a root and its children); the root
    carries a ``pad`` attribute of ``pad_bytes`` characters."""
    trace_id = trace_id or new_trace_id()
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    kv = rs.resource.attributes.add()
    kv.key, kv.value.string_value = "service.name", service
    ss = rs.scope_spans.add()
    for i in range(n):
        span = ss.spans.add()
        span.trace_id = trace_id
        span.span_id = (i + 1).to_bytes(8, "big")
        if i:
            span.parent_span_id = (1).to_bytes(8, "big")
        span.name = f"op{i}"
        span.kind = 1
        span.start_time_unix_nano = T0 + i
        span.end_time_unix_nano = T0 + 1000
        attr = span.attributes.add()
        attr.key, attr.value.string_value = "hoptrace.stage", "inference"
        if pad_bytes and not i:
            attr = span.attributes.add()
            attr.key, attr.value.string_value = "pad", "x" * pad_bytes
    return request


def nested_proto_value(value: AnyValue, depth: int, kind: str = "kvlist") -> None:
    """Make ``value`` ``depth`` levels deep (a plain value is one level)."""
    for _ in range(depth - 1):
        if kind == "kvlist":
            entry = value.kvlist_value.values.add()
            entry.key = "k"
            value = entry.value
        else:
            value = value.array_value.values.add()
    value.int_value = 1


def deep_proto_span_bytes(depth: int, kind: str = "kvlist", trace_id: bytes | None = None) -> bytes:
    """A request of 3 spans whose second has an attribute ``depth`` levels deep.

    Built on the wire, since the protobuf library itself refuses to copy such a span.
    """
    good = proto_request(3, trace_id)
    spans = good.resource_spans[0].scope_spans[0].spans
    leaf = b"\x18\x01"  # AnyValue{int_value: 1}
    value = leaf
    for _ in range(depth - 1):
        if kind == "kvlist":
            value = _ld(6, _ld(1, _ld(1, b"k") + _ld(2, value)))
        else:
            value = _ld(5, _ld(1, value))
    deep_attribute = _ld(9, _ld(1, b"deep") + _ld(2, value))
    encoded = [s.SerializeToString() for s in spans]
    encoded[1] += deep_attribute
    scope = b"".join(_ld(2, s) for s in encoded)
    resource = good.resource_spans[0].resource.SerializeToString()
    return _ld(1, _ld(1, resource) + _ld(2, scope))


def _ld(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def json_span(i: int, trace_id: str, **fields: Any) -> dict[str, Any]:
    span = {
        "traceId": trace_id,
        "spanId": f"{i + 1:016x}",
        "name": f"op{i}",
        "kind": 1,
        "startTimeUnixNano": str(T0 + i),
        "endTimeUnixNano": str(T0 + 1000),
        "attributes": [{"key": "hoptrace.stage", "value": {"stringValue": "inference"}}],
    }
    if i:
        span["parentSpanId"] = f"{1:016x}"
    span.update(fields)
    return span


def json_request(spans: list[dict[str, Any]], resource: Any = None) -> dict[str, Any]:
    if resource is None:
        resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}


def json_batch(n: int = 3, trace_id: str | None = None, **changes: dict[str, Any]) -> dict:
    """``n`` good JSON spans; ``changes={"span1": {...}}`` alters the second span."""
    trace_id = trace_id or new_trace_id().hex()
    spans = [json_span(i, trace_id) for i in range(n)]
    for key, fields in changes.items():
        spans[int(key.removeprefix("span"))].update(fields)
    return json_request(spans)


DEEP = "__deep_value__"


def nested_json_value(depth: int, kind: str = "arrayValue") -> bytes:
    """The JSON text of a value ``depth`` levels deep (a plain value is one level)."""
    text = b'{"intValue":"1"}'
    for _ in range(depth - 1):
        if kind == "arrayValue":
            text = b'{"arrayValue":{"values":[' + text + b"]}}"
        else:
            text = b'{"kvlistValue":{"values":[{"key":"k","value":' + text + b"}]}}"
    return text


def dumps(obj: Any, deep: bytes | None = None) -> bytes:
    """``obj`` as JSON, with the string :data:`DEEP` replaced by ``deep`` (JSON text)."""
    text = orjson.dumps(obj)
    if deep is not None:
        text = text.replace(orjson.dumps(DEEP), deep)
    return text


def two_gzip_members(first: bytes, second: bytes) -> bytes:
    return gzip.compress(first) + gzip.compress(second)
