"""A string that is not UTF-8 in a protobuf batch costs its span (or the spans of its
resource), never the batch: the rest is stored, with OTLP partial success."""

from __future__ import annotations

from pathlib import Path

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from collector import SpanStore
from tests.collector import bodies
from tests.conftest import CollectorProcess


def _post(collector: CollectorProcess, body: bytes) -> ExportTraceServiceResponse:
    answer = httpx.post(collector.endpoint + "/v1/traces", content=body, headers=bodies.PROTO)
    assert answer.status_code == 200, answer.text
    return ExportTraceServiceResponse.FromString(answer.content)


def test_a_span_name_that_is_not_utf8_costs_only_its_span(tmp_path: Path):
    request = bodies.proto_request(3)
    request.resource_spans[0].scope_spans[0].spans[1].name = "BADNAME"
    body = request.SerializeToString().replace(b"BADNAME", b"BAD\xffAME")
    second = bodies.proto_request(2, service="other")  # a second resource, untouched
    kv = second.resource_spans[0].resource.attributes.add()
    kv.key, kv.value.string_value = "host.name", "BADHOST"
    other = second.SerializeToString().replace(b"BADHOST", b"BAD\xfeOST")
    collector = CollectorProcess(tmp_path / "spans.db")
    try:
        one = _post(collector, body)
        both = _post(collector, bodies.proto_request(3).SerializeToString() + other)
    finally:
        collector.stop()
    assert one.partial_success.rejected_spans == 1
    assert "not valid UTF-8" in one.partial_success.error_message
    assert both.partial_success.rejected_spans == 2  # the bad resource's two spans
    assert (
        "its resource holds a string that is not valid UTF-8" in both.partial_success.error_message
    )
    with SpanStore(tmp_path / "spans.db") as store:
        assert store.count() == 2 + 3


def test_a_json_span_with_bytes_that_are_not_utf8_costs_only_its_span(tmp_path: Path):
    import orjson

    from tests.hostile.spans import span, trio

    body = orjson.dumps(trio()).replace(b'"name":"op"', b'"name":"BADNAME"', 1)
    body = body.replace(b"BADNAME", b"BAD\xffAME")
    other = orjson.dumps(
        {"resourceSpans": [{"resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": "BADSVC"}}]},
            "scopeSpans": [{"spans": [span("4" * 16, trace_id="cd" * 16)]}]}]}
    ).replace(b"BADSVC", b"BAD\xfeSVC")  # fmt: skip
    collector = CollectorProcess(tmp_path / "spans.db")
    try:
        one = httpx.post(collector.endpoint + "/v1/traces", content=body, headers=bodies.JSON)
        two = httpx.post(collector.endpoint + "/v1/traces", content=other, headers=bodies.JSON)
    finally:
        collector.stop()
    assert one.status_code == 200 and two.status_code == 200
    assert one.json()["partialSuccess"]["rejectedSpans"] == "1"
    assert "the span holds a string that is not valid UTF-8" in one.text
    assert "its resource holds a string that is not valid UTF-8" in two.text
    with SpanStore(tmp_path / "spans.db") as store:
        assert store.count() == 2
