"""``protocol="http/json"``: spans sent as OTLP JSON arrive as the protobuf exporter's do."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import orjson
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult

from tests.helpers import emit_sample_spans
from tracer.sdk.json_export import JsonSpanExporter, encode
from tracer.spans import Warnings, spans_from_otlp_json, spans_from_otlp_proto
from tracer.testing import capture_spans


def _spans():
    """A parent and a child with every kind of attribute, an event, a link, an error."""
    with capture_spans() as captured:
        from opentelemetry import trace

        emit_sample_spans(trace.get_tracer("test", "1.2"))
    return captured.spans


def _decoded_json(spans):
    return sorted(
        spans_from_otlp_json(orjson.loads(encode(spans)), Warnings()), key=lambda s: s.name
    )


def _decoded_proto(spans):
    return sorted(spans_from_otlp_proto(encode_spans(spans), Warnings()), key=lambda s: s.name)


def test_json_body_decodes_to_the_same_spans_as_the_protobuf_one():
    spans = _spans()
    assert _decoded_json(spans) == _decoded_proto(spans)
    body = orjson.loads(encode(spans))
    scope = body["resourceSpans"][0]["scopeSpans"][0]
    assert scope["scope"] == {"name": "test", "version": "1.2"}
    by_name = {s["name"]: s for s in scope["spans"]}
    assert by_name["child"]["parentSpanId"] == by_name["parent"]["spanId"]
    assert by_name["child"]["status"] == {"code": 2, "message": "boom"}
    assert by_name["parent"]["kind"] == 2 and by_name["child"]["kind"] == 3
    values = {a["key"]: a["value"] for a in by_name["parent"]["attributes"]}
    assert values["i"] == {"intValue": "7"} and values["b"] == {"boolValue": True}
    assert values["n"] == {"arrayValue": {"values": [{"intValue": "1"}, {"intValue": "2"}]}}


def _typed_span(value):
    with capture_spans() as captured:
        from opentelemetry import trace

        trace.get_tracer("test").start_span("s", attributes={"v": value, "same": "x"}).end()
    return captured.spans


def test_equal_values_of_different_types_keep_their_own_json_type():
    # True == 1 == 1.0 in Python: the encoder's cache of repeated values must not
    # hand one type's encoding to another.
    got = []
    for value in (True, 1, 1.0, "1", 1, True):
        body = orjson.loads(encode(_typed_span(value)))
        attributes = body["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]
        got.append({a["key"]: a["value"] for a in attributes}["v"])
    assert got == [
        {"boolValue": True},
        {"intValue": "1"},
        {"doubleValue": 1.0},
        {"stringValue": "1"},
        {"intValue": "1"},
        {"boolValue": True},
    ]


def test_many_distinct_values_encode_the_same_as_the_protobuf_exporter():
    # More distinct values than the encoder caches: the cache is emptied, not wrong.
    spans = [s for i in range(5000) for s in _typed_span(i)]
    assert _decoded_json(spans) == _decoded_proto(spans)


class _Receiver(BaseHTTPRequestHandler):
    answers: list[int] = []
    bodies: list[bytes] = []

    def do_POST(self):  # noqa: N802 - http.server's interface
        body = self.rfile.read(int(self.headers["content-length"]))
        status = self.answers.pop(0) if self.answers else 200
        if status == 200:
            self.bodies.append(body)
        self.send_response(status)
        if status == 503:
            self.send_header("retry-after", "0.05")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    _Receiver.answers, _Receiver.bodies = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/v1/traces", _Receiver
    server.shutdown()
    server.server_close()


def test_retryable_answers_are_retried_after_retry_after(receiver):
    url, handler = receiver
    handler.answers = [503, 503]
    exporter = JsonSpanExporter(url, headers={"authorization": "Bearer t"}, timeout_s=5)
    assert exporter.export(_spans()) == SpanExportResult.SUCCESS
    assert len(handler.bodies) == 1 and not handler.answers
    exporter.shutdown()


def test_a_refused_batch_fails_without_retrying_or_raising(receiver, caplog):
    url, handler = receiver
    handler.answers = [400, 400]
    exporter = JsonSpanExporter(url, timeout_s=5)
    assert exporter.export(_spans()) == SpanExportResult.FAILURE
    assert exporter.export(_spans()) == SpanExportResult.FAILURE
    assert handler.bodies == [] and handler.answers == []
    assert sum("answered 400" in r.getMessage() for r in caplog.records) == 1  # logged once
    exporter.shutdown()


def test_nobody_listening_fails_within_the_timeout():
    exporter = JsonSpanExporter("http://127.0.0.1:9/v1/traces", timeout_s=1.0)
    assert exporter.export(_spans()) == SpanExportResult.FAILURE
    exporter.shutdown()


def test_setup_with_http_json_reaches_a_real_collector(tmp_path):
    from collector import BackgroundCollector
    from tracer.sdk.setup import _make_exporter

    with BackgroundCollector(tmp_path / "s.db") as collector:
        provider = TracerProvider()
        exporter = _make_exporter(collector.endpoint, "http/json", None)
        assert isinstance(exporter, JsonSpanExporter)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        with provider.get_tracer("t").start_as_current_span("hello", attributes={"k": 3}):
            pass
        provider.shutdown()
        stored = list(collector.store.iter_spans())
    assert [(s.name, s.attributes["k"]) for s in stored] == [("hello", 3)]


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("2", 2.0),
        ("0.5", 0.5),
        ("²", None),
        ("nan", None),
        ("inf", None),
        ("-1", None),
        ("Wed, 21 Oct 2026 07:28:00 GMT", None),
        ("", None),
    ],
)
def test_retry_after_header_is_read_or_ignored_never_raised(header, expected):
    from tracer.sdk.json_export import _retry_after

    assert _retry_after(header) == expected
