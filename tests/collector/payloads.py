"""Large OTLP protobuf bodies for load tests, made once and re-stamped per request.

A body's trace ids all begin with the same 8 random bytes; :meth:`Bodies.stamp`
replaces them with the request's own number, so every request carries new spans
(the store keeps one span per trace id and span id) without encoding anything again.
"""

from __future__ import annotations

import os
import struct

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue

from tracer import attributes as attrs

#: Spans per trace in the bodies made here (a root and its children).
SPANS_PER_TRACE = 8
_STAGES = ("gateway", "auth", "context", "inference", "postprocess", "return", "client")


def _kv(key: str, value: str | int | float) -> KeyValue:
    kv = KeyValue(key=key)
    if isinstance(value, str):
        kv.value.string_value = value
    elif isinstance(value, int):
        kv.value.int_value = value
    else:
        kv.value.double_value = value
    return kv


class Bodies:
    """Protobuf bodies of about ``body_bytes`` each, with new trace ids per stamp."""

    def __init__(self, body_bytes: int, service: str = "load"):
        self.marker = os.urandom(8)
        request = ExportTraceServiceRequest()
        rs = request.resource_spans.add()
        rs.resource.attributes.extend([_kv("service.name", service), _kv("host.name", "h1")])
        ss = rs.scope_spans.add()
        ss.scope.name = "hoptrace.load"
        start = 1_700_000_000_000_000_000
        trace = 0
        traces = None
        while traces is None or trace < traces:
            if trace == 1:  # one trace made: how many make the size (ByteSize is not free)
                per_trace = max(1, request.ByteSize() - rs.resource.ByteSize())
                traces = max(1, body_bytes // per_trace)
            trace_id = self.marker + struct.pack(">Q", trace + 1)
            for i in range(SPANS_PER_TRACE):
                span = ss.spans.add()
                span.trace_id = trace_id
                span.span_id = struct.pack(">II", trace + 1, i + 1)
                if i:
                    span.parent_span_id = struct.pack(">II", trace + 1, 1)
                span.name = f"POST /v1/{_STAGES[i % len(_STAGES)]}"
                span.kind = 2 if i == 0 else 3
                span.start_time_unix_nano = start + trace * 1_000_000 + i * 1_000
                span.end_time_unix_nano = span.start_time_unix_nano + 900_000 - i * 1_000
                span.attributes.extend(
                    [
                        _kv(attrs.STAGE, _STAGES[i % len(_STAGES)]),
                        _kv("http.request.method", "POST"),
                        _kv("url.path", f"/v1/{_STAGES[i % len(_STAGES)]}/{trace % 97}"),
                        _kv("http.response.status_code", 200),
                        _kv("gen_ai.request.model", "demo-model"),
                        _kv("gen_ai.usage.output_tokens", 100 + i),
                    ]
                )
                span.status.code = 1
            trace += 1
        self.spans = trace * SPANS_PER_TRACE
        self._template = request.SerializeToString()
        self.size = len(self._template)

    def stamp(self, number: int) -> bytes:
        """The body with every trace id carrying ``number`` (>= 0) in its first 8 bytes."""
        return self._template.replace(self.marker, struct.pack(">Q", number + 1))

    @staticmethod
    def number_of(trace_id_hex: str) -> int:
        """The stamp number of a stored trace id (its first 16 hex digits)."""
        return int(trace_id_hex[:16], 16) - 1


def rows_of(body: bytes) -> list[tuple]:
    """The store rows of a protobuf ``body``, as the receiver makes them."""
    from collector.decode import decode_body

    return decode_body(
        [body], is_json=False, gzipped=False, max_body_bytes=len(body) + 1, content=None
    ).rows
