"""The embedded collector, as a real process, fed by the official OTLP/HTTP exporter."""

from __future__ import annotations

import base64
import gzip
import os

import httpx
import orjson
import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from collector import SpanStore
from tracer import attributes as attrs
from tracer import mark_first_token
from tracer.spans.model import KIND_CLIENT, KIND_INTERNAL


def _make_spans(provider: TracerProvider, n_traces: int = 3) -> None:
    t = provider.get_tracer("test")
    for _ in range(n_traces):
        with t.start_as_current_span("request", attributes={attrs.STAGE: "client"}) as root:
            with t.start_as_current_span("POST", kind=SpanKind.CLIENT) as call:
                mark_first_token(call, call.start_time)
            mark_first_token(root, root.start_time)


def _readable_spans(n_traces: int = 2):
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "json-client"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    _make_spans(provider, n_traces)
    return memory.get_finished_spans()


def _otlp_json(spans) -> dict:
    """OTLP JSON as the spec writes it: ids in hex."""
    body = MessageToDict(encode_spans(spans))
    for rs in body["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in s:
                        s[key] = base64.b64decode(s[key]).hex()
    return body


def _stored(store_path) -> list:
    with SpanStore(store_path) as store:
        return list(store.iter_spans())


@pytest.mark.parametrize("compression", [Compression.NoCompression, Compression.Gzip])
def test_official_exporter_protobuf_spans_arrive_intact(collector_process, compression):
    provider = TracerProvider(resource=Resource.create({"service.name": "exporter-test"}))
    exporter = OTLPSpanExporter(
        endpoint=collector_process.endpoint + "/v1/traces", compression=compression
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _make_spans(provider, n_traces=3)
    provider.shutdown()

    spans = _stored(collector_process.store)
    assert len(spans) == 6
    roots = [s for s in spans if s.parent_id is None]
    calls = [s for s in spans if s.parent_id is not None]
    assert len(roots) == 3 and len(calls) == 3
    by_id = {s.span_id: s for s in spans}
    for call in calls:
        parent = by_id[call.parent_id]
        assert parent.stage == "client" and parent.kind == KIND_INTERNAL
        assert call.kind == KIND_CLIENT and call.trace_id == parent.trace_id
        assert call.service == "exporter-test"
        assert call.start_ns <= call.first_token_ns <= call.end_ns
    assert collector_process.health()["spans_stored"] == 6


@pytest.mark.parametrize("gzipped", [False, True])
def test_otlp_json_batch_is_stored_with_marks(collector_process, gzipped):
    readable = _readable_spans(2)
    body = orjson.dumps(_otlp_json(readable))
    headers = {"content-type": "application/json"}
    if gzipped:
        body = gzip.compress(body)
        headers["content-encoding"] = "gzip"
    response = httpx.post(collector_process.endpoint + "/v1/traces", content=body, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json() == {}
    spans = _stored(collector_process.store)
    assert {s.span_id for s in spans} == {format(s.context.span_id, "016x") for s in readable}
    assert all(s.first_token_ns is not None for s in spans)
    assert {s.stage for s in spans} == {"client", None}


def test_partial_success_reports_spans_without_ids(collector_process):
    body = _otlp_json(_readable_spans(1))
    spans = body["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0]["spanId"] = ""
    response = httpx.post(
        collector_process.endpoint + "/v1/traces",
        content=orjson.dumps(body),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 200
    partial = response.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1"
    assert "span id" in partial["errorMessage"]
    assert len(_stored(collector_process.store)) == 1


_GOOD = None


def _bad_requests():
    valid_proto = encode_spans(_readable_spans(1)).SerializeToString()
    bomb = gzip.compress(b"{" + b" " * 400_000 + b"}")
    proto = {"content-type": "application/x-protobuf"}
    json_h = {"content-type": "application/json"}
    return [
        ("random bytes", os.urandom(64) + b"\xff\xff\xff", proto, 400),
        ("truncated protobuf", valid_proto[: len(valid_proto) // 2], proto, 400),
        ("invalid JSON", b'{"resourceSpans": [', json_h, 400),
        ("JSON of the wrong shape", b'{"spans": []}', json_h, 400),
        ("wrong content type", b"hello", {"content-type": "text/plain"}, 415),
        ("body over the limit", b"x" * 300_000, proto, 413),
        ("gzip past the limit", bomb, {**json_h, "content-encoding": "gzip"}, 413),
        ("broken gzip", b"\x1f\x8b\x08garbage", {**proto, "content-encoding": "gzip"}, 400),
    ]


def test_bad_requests_get_4xx_with_reason_and_store_nothing(collector_process):
    url = collector_process.endpoint + "/v1/traces"
    for label, body, headers, status in _bad_requests():
        response = httpx.post(url, content=body, headers=headers)
        assert response.status_code == status, (label, response.text)
        assert response.json()["message"], label
    assert _stored(collector_process.store) == []
    good = encode_spans(_readable_spans(1)).SerializeToString()
    response = httpx.post(url, content=good, headers={"content-type": "application/x-protobuf"})
    assert response.status_code == 200
    assert len(_stored(collector_process.store)) == 2


def test_bearer_token_guards_the_receiver(tmp_path):
    from tests.conftest import CollectorProcess

    proc = CollectorProcess(tmp_path / "s.db", "--token", "s3cret")
    try:
        body = encode_spans(_readable_spans(1)).SerializeToString()
        headers = {"content-type": "application/x-protobuf"}
        denied = httpx.post(proc.endpoint + "/v1/traces", content=body, headers=headers)
        assert denied.status_code == 401
        allowed = httpx.post(
            proc.endpoint + "/v1/traces",
            content=body,
            headers={**headers, "authorization": "Bearer s3cret"},
        )
        assert allowed.status_code == 200
    finally:
        proc.stop()
    assert len(_stored(tmp_path / "s.db")) == 2


def test_store_is_readable_by_another_process_during_ingest(collector_process):
    url = collector_process.endpoint + "/v1/traces"
    headers = {"content-type": "application/x-protobuf"}
    for _ in range(5):
        httpx.post(
            url, content=encode_spans(_readable_spans(2)).SerializeToString(), headers=headers
        )
        reader = SpanStore(collector_process.store)  # a second connection while ingest goes on
        assert reader.count() % 4 == 0
        reader.close()
    with SpanStore(collector_process.store) as store:
        assert store.count() == 20


def test_duplicate_spans_are_stored_once(collector_process):
    body = encode_spans(_readable_spans(1)).SerializeToString()
    headers = {"content-type": "application/x-protobuf"}
    for _ in range(3):
        assert (
            httpx.post(
                collector_process.endpoint + "/v1/traces", content=body, headers=headers
            ).status_code
            == 200
        )
    assert len(_stored(collector_process.store)) == 2
