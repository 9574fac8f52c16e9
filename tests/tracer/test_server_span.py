"""``instrument_fastapi``'s server span is the upstream instrumentation's span: the same
name, kind, status and attributes in the same order (its attributes are set once
instead of twice), for a streamed answer and for an error; hoptrace's load
attributes come last."""

from __future__ import annotations

import asyncio

from fastapi import FastAPI, HTTPException
from fastapi.responses import StreamingResponse
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.trace import SpanKind

import tracer
from tracer import attributes as attrs
from tracer.testing import call_asgi, capture_spans

_SCOPE = {
    "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
    "scheme": "http", "root_path": "", "query_string": b"q=1",
    "client": ("127.0.0.1", 50123), "server": ("127.0.0.1", 8000),
    "headers": [(b"host", b"127.0.0.1:8000"), (b"user-agent", b"test-agent"),
                (b"content-type", b"application/json"), (b"content-length", b"2"),
                (b"traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")],
}  # fmt: skip


def _app() -> FastAPI:
    app = FastAPI()

    @app.post("/v1/items/{item}")
    async def item(item: str) -> StreamingResponse:
        if item == "missing":
            raise HTTPException(404, "no such item")

        async def body():
            for part in ("a", "b", "c"):
                yield part.encode()

        return StreamingResponse(body(), media_type="text/plain")

    return app


def _server_span(app: FastAPI, path: str):
    scope = dict(_SCOPE, path=path, raw_path=path.encode())
    with capture_spans() as captured:
        sent = asyncio.run(call_asgi(app, scope, b"{}"))
    (span,) = [s for s in captured.spans if s.kind == SpanKind.SERVER]
    return span, sent[0]["status"]


def _upstream_app() -> FastAPI:
    app = _app()

    def hook(span, scope):
        span.set_attribute(attrs.STAGE, "gateway")

    FastAPIInstrumentor.instrument_app(
        app, server_request_hook=hook, exclude_spans=["send", "receive"]
    )
    return app


def test_the_server_span_is_the_upstream_instrumentations_span():
    with capture_spans():  # an SDK provider first: the stripping needs its sampler
        ours = tracer.instrument_fastapi(_app(), stage="gateway")
        upstream = _upstream_app()
    for path, status in (("/v1/items/one", 200), ("/v1/items/missing", 404)):
        mine, my_status = _server_span(ours, path)
        theirs, their_status = _server_span(upstream, path)
        assert my_status == their_status == status
        assert mine.name == theirs.name == "POST /v1/items/{item}"
        assert mine.kind == theirs.kind == SpanKind.SERVER
        assert mine.status.status_code == theirs.status.status_code
        load_keys = [
            attrs.SERVICE_INSTANCE_ID, attrs.HOST_NAME, attrs.HOST_CPUS, attrs.PROCESS_CPUS,
            attrs.PROCESS_CPU_NS, attrs.PROCESS_CPU_TOTAL_NS,
        ]  # fmt: skip
        assert list(mine.attributes)[-len(load_keys) :] == load_keys
        upstream_part = [(k, v) for k, v in mine.attributes.items() if k not in load_keys]
        assert upstream_part == list(theirs.attributes.items())
        assert mine.parent is not None and mine.parent.span_id == 0xB7AD6B7169203331
        values = dict(mine.attributes)
        assert values["http.route"] == "/v1/items/{item}"
        assert values["http.status_code"] == status
        assert values["http.method"] == "POST" and values[attrs.STAGE] == "gateway"
