"""``instrument_httpx`` has the upstream instrumentation normalise headers only when it
captures some: the CLIENT span is the same, captured headers included."""

from __future__ import annotations

import httpx
from opentelemetry.trace import SpanKind

import tracer
from tracer.testing import capture_spans


class _Body(httpx.SyncByteStream):
    def __iter__(self):
        yield b"o"
        yield b"k"


def _reply(request: httpx.Request) -> httpx.Response:
    return httpx.Response(
        200, headers=[("x-reply", "r1, r2"), ("content-type", "text/plain")], stream=_Body()
    )


def _client_span(headers: dict[str, str] | None = None):
    with capture_spans() as captured:
        client = tracer.instrument_httpx(httpx.Client(transport=httpx.MockTransport(_reply)))
        resp = client.get("http://127.0.0.1:9/path?q=1", headers=headers or {})
        assert resp.status_code == 200 and resp.read() == b"ok"
    client.close()
    (span,) = [s for s in captured.spans if s.kind == SpanKind.CLIENT]
    return span


def test_client_span_keeps_its_http_attributes_without_header_capture():
    span = _client_span({"x-custom": "a"})
    assert span.name == "GET"
    values = dict(span.attributes or {})
    assert values["http.method"] == "GET"
    assert values["http.url"] == "http://127.0.0.1:9/path?q=1"
    assert values["http.status_code"] == 200
    assert not any(".header." in key for key in values)  # nothing captured unasked


def test_captured_headers_are_still_recorded_split_at_commas(monkeypatch):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_REQUEST", "x-custom")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_RESPONSE", "x-reply")
    span = _client_span({"x-custom": "a, b"})
    values = dict(span.attributes or {})
    assert values["http.request.header.x_custom"] == ("a", "b")
    assert values["http.response.header.x_reply"] == ("r1", "r2")
    assert values["http.status_code"] == 200
