"""The httpx CLIENT span covers a streamed body, over real HTTP on a loopback port."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from opentelemetry.trace import SpanKind

import tracer
from tests.conftest import free_port, wait_http
from tracer import attributes as attrs
from tracer.testing import capture_spans

CHUNKS = 5
GAP_S = 0.08


@pytest.fixture(scope="module")
def server():
    app = FastAPI()

    @app.get("/stream")
    async def stream() -> StreamingResponse:
        async def body():
            await asyncio.sleep(GAP_S)  # the headers go out first, the body trickles
            for i in range(CHUNKS):
                yield f"chunk {i}\n".encode()
                await asyncio.sleep(GAP_S)

        return StreamingResponse(body(), media_type="text/plain")

    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    wait_http(f"http://127.0.0.1:{port}/docs")
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)


def _client_span(spans):
    found = [s for s in spans.spans if s.kind == SpanKind.CLIENT]
    assert len(found) == 1, [s.name for s in spans.spans]
    return found[0]


def test_sync_client_span_ends_with_the_body_and_marks_the_first_chunk(server):
    client = tracer.instrument_httpx(httpx.Client())
    with capture_spans() as spans:
        with client.stream("GET", server + "/stream") as resp:
            assert resp.status_code == 200
            headers_at = time.time_ns()
            got = list(resp.iter_raw())
            body_done_at = time.time_ns()
    client.close()
    assert b"".join(got).count(b"chunk") == CHUNKS
    span = _client_span(spans)
    # The span runs to the end of the body, not to the response headers.
    assert span.end_time >= body_done_at - 5_000_000
    assert span.end_time - headers_at >= CHUNKS * GAP_S * 0.8 * 1e9
    marks = [e for e in span.events if e.name == attrs.FIRST_TOKEN_EVENT]
    assert len(marks) == 1
    assert span.start_time < marks[0].timestamp < span.end_time
    # The first chunk came about one gap after the start, long before the end.
    assert marks[0].timestamp - span.start_time < (span.end_time - span.start_time) / 2
    assert span.attributes[attrs.CHUNKS] >= 1


def test_async_client_span_ends_with_the_body(server):
    async def run() -> tuple[int, int]:
        async with tracer.instrument_httpx(httpx.AsyncClient()) as client:
            async with client.stream("GET", server + "/stream") as resp:
                headers_at = time.time_ns()
                async for _ in resp.aiter_raw():
                    pass
                return headers_at, time.time_ns()

    with capture_spans() as spans:
        headers_at, done_at = asyncio.run(run())
    span = _client_span(spans)
    assert span.end_time >= done_at - 5_000_000
    assert span.end_time - headers_at >= CHUNKS * GAP_S * 0.8 * 1e9
    assert any(e.name == attrs.FIRST_TOKEN_EVENT for e in span.events)


def test_a_body_closed_early_still_ends_the_span(server):
    client = tracer.instrument_httpx(httpx.Client())
    with capture_spans() as spans:
        with client.stream("GET", server + "/stream") as resp:
            next(resp.iter_raw())
    client.close()
    span = _client_span(spans)
    assert span.end_time is not None
    assert span.end_time - span.start_time < CHUNKS * GAP_S * 1e9
    assert span.attributes[attrs.CHUNKS] == 1  # what was read before the close
