"""The CLIENT span of an httpx or httpx2 client (httpx2 is the openai SDK 3.x default)
covers a streamed body, over real HTTP on a loopback port."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from types import ModuleType

import httpx
import httpx2
import openai
import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

import tracer
from tests.conftest import free_port, wait_http
from tracer import attributes as attrs
from tracer.testing import capture_spans

CHUNKS = 5
GAP_S = 0.08
WORDS = ["Hello", " from", " the", " fake", " model"]


@dataclass
class Server:
    url: str
    traceparents: list[str] = field(default_factory=list)


def _chat_chunk(delta: dict, finish_reason: str | None = None) -> bytes:
    chunk = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    return f"data: {json.dumps(chunk)}\n\n".encode()


@pytest.fixture(scope="module")
def server():
    app = FastAPI()
    seen: list[str] = []

    @app.get("/stream")
    async def stream(request: Request) -> StreamingResponse:
        seen.append(request.headers.get("traceparent", ""))

        async def body():
            await asyncio.sleep(GAP_S)  # the headers go out first, the body trickles
            for i in range(CHUNKS):
                yield f"chunk {i}\n".encode()
                await asyncio.sleep(GAP_S)

        return StreamingResponse(body(), media_type="text/plain")

    @app.post("/v1/answer")
    async def answer(request: Request) -> dict:
        seen.append(request.headers.get("traceparent", ""))
        await asyncio.sleep(GAP_S)
        return {"choices": [{"message": {"content": "".join(WORDS)}}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> StreamingResponse:
        seen.append(request.headers.get("traceparent", ""))
        assert (await request.json())["stream"] is True

        async def body():
            yield _chat_chunk({"role": "assistant", "content": ""})
            for word in WORDS:
                await asyncio.sleep(GAP_S / 4)
                yield _chat_chunk({"content": word})
            yield _chat_chunk({}, finish_reason="stop")
            yield b"data: [DONE]\n\n"

        return StreamingResponse(body(), media_type="text/event-stream")

    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    wait_http(f"http://127.0.0.1:{port}/docs")
    yield Server(f"http://127.0.0.1:{port}", seen)
    srv.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(params=[httpx, httpx2], ids=lambda module: module.__name__)
def lib(request: pytest.FixtureRequest) -> ModuleType:
    """The client library under test: ``lib.Client()`` / ``lib.AsyncClient()``."""
    return request.param


def _client_span(spans):
    found = [s for s in spans.spans if s.kind == SpanKind.CLIENT]
    assert len(found) == 1, [s.name for s in spans.spans]
    return found[0]


def _first_token_marks(span) -> list:
    return [e for e in span.events if e.name == attrs.FIRST_TOKEN_EVENT]


def _assert_propagated(server: Server, span) -> None:
    ctx = span.get_span_context()
    # Don't pin the flags byte: it depends on the id generator.
    assert f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-" in [t[:53] for t in server.traceparents]


def test_sync_client_span_ends_with_the_body_and_marks_the_first_chunk(server, lib):
    with tracer.instrument_httpx(lib.Client()) as client:
        with capture_spans() as spans:
            with client.stream("GET", server.url + "/stream") as resp:
                assert resp.status_code == 200
                headers_at = time.time_ns()
                got = list(resp.iter_raw())
                body_done_at = time.time_ns()
    assert b"".join(got).count(b"chunk") == CHUNKS
    span = _client_span(spans)
    # The span runs to the end of the body, not to the response headers.
    assert span.end_time >= body_done_at - 5_000_000
    assert span.end_time - headers_at >= CHUNKS * GAP_S * 0.8 * 1e9
    marks = _first_token_marks(span)
    assert len(marks) == 1
    assert span.start_time < marks[0].timestamp < span.end_time
    # The first chunk came about one gap after the start, long before the end.
    assert marks[0].timestamp - span.start_time < (span.end_time - span.start_time) / 2
    assert span.attributes[attrs.CHUNKS] >= 1
    _assert_propagated(server, span)


def test_async_client_span_ends_with_the_body_and_marks_the_first_chunk(server, lib):
    async def run() -> tuple[int, int]:
        async with tracer.instrument_httpx(lib.AsyncClient()) as client:
            async with client.stream("GET", server.url + "/stream") as resp:
                headers_at = time.time_ns()
                async for _ in resp.aiter_raw():
                    pass
                return headers_at, time.time_ns()

    with capture_spans() as spans:
        headers_at, done_at = asyncio.run(run())
    span = _client_span(spans)
    assert span.end_time >= done_at - 5_000_000
    assert span.end_time - headers_at >= CHUNKS * GAP_S * 0.8 * 1e9
    marks = _first_token_marks(span)
    assert len(marks) == 1
    assert span.start_time < marks[0].timestamp < span.end_time
    _assert_propagated(server, span)


def test_sync_span_ends_when_the_body_is_closed_early(server, lib):
    with tracer.instrument_httpx(lib.Client()) as client:
        with capture_spans() as spans:
            with client.stream("GET", server.url + "/stream") as resp:
                next(resp.iter_raw())
    span = _client_span(spans)
    assert span.end_time is not None
    assert span.end_time - span.start_time < CHUNKS * GAP_S * 1e9
    assert span.attributes[attrs.CHUNKS] == 1  # what was read before the close
    assert len(_first_token_marks(span)) == 1
    _assert_propagated(server, span)


def test_async_span_ends_when_the_body_is_closed_early(server, lib):
    async def run() -> None:
        async with tracer.instrument_httpx(lib.AsyncClient()) as client:
            async with client.stream("GET", server.url + "/stream") as resp:
                async for _ in resp.aiter_raw():
                    break

    with capture_spans() as spans:
        asyncio.run(run())
    span = _client_span(spans)
    assert span.end_time is not None
    assert span.end_time - span.start_time < CHUNKS * GAP_S * 1e9
    assert span.attributes[attrs.CHUNKS] == 1  # what was read before the close
    assert len(_first_token_marks(span)) == 1
    _assert_propagated(server, span)


def test_openai_stream_propagates_the_client_span_with_default_httpx_client(server):
    http_client = tracer.instrument_httpx(openai.DefaultHttpxClient())
    llm = openai.OpenAI(base_url=server.url + "/v1", api_key="k", http_client=http_client)
    with capture_spans() as spans:
        stream = llm.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    llm.close()
    assert text == "".join(WORDS)
    span = _client_span(spans)
    # The span covers the streamed body: the words trickle for len(WORDS) gaps.
    assert span.end_time - span.start_time >= len(WORDS) * GAP_S / 4 * 0.8 * 1e9
    assert _first_token_marks(span)
    ctx = span.get_span_context()
    assert f"00-{ctx.trace_id:032x}-" in [t[:36] for t in server.traceparents]
    _assert_propagated(server, span)


def test_a_failed_request_ends_its_client_span_with_the_error_and_the_context_restored(lib):
    def refuse(request):
        raise lib.ConnectError("refused", request=request)

    client = tracer.instrument_httpx(lib.Client(transport=lib.MockTransport(refuse)))
    before = trace.get_current_span()
    with capture_spans() as spans:
        with pytest.raises(lib.ConnectError):
            client.get("http://127.0.0.1:9/x")
    span = _client_span(spans)
    assert span.end_time is not None and span.status.status_code == StatusCode.ERROR
    assert [e.name for e in span.events] == ["exception"]
    assert trace.get_current_span() is before


@pytest.mark.parametrize("module", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_a_response_built_in_memory_ends_its_client_span(module: ModuleType):
    # A mock transport's response has its body read before the client sees it: no
    # stream is left to end the span, which must end anyway (it never did before). Only
    # the event stream's body is a first token; the JSON answer's is not.
    def handler(request):
        if request.url.path == "/empty":
            return module.Response(204)
        if request.url.path == "/sse":
            return module.Response(
                200, content=b"data: hi\n\n", headers={"content-type": "text/event-stream"}
            )
        return module.Response(200, json={"ok": True})

    paths = ("/empty", "/j", "/sse")

    async def both_async() -> list[int]:
        async with module.AsyncClient(transport=module.MockTransport(handler)) as client:
            tracer.instrument_httpx(client)
            return [(await client.get(f"http://mock{p}")).status_code for p in paths]

    with capture_spans() as captured:
        with module.Client(transport=module.MockTransport(handler)) as client:
            tracer.instrument_httpx(client)
            statuses = [client.get(f"http://mock{p}").status_code for p in paths]
        statuses += asyncio.run(both_async())
    assert statuses == [204, 200, 200] * 2
    spans = [s for s in captured.spans if s.kind == SpanKind.CLIENT]
    assert [s.attributes[attrs.CHUNKS] for s in spans] == [0, 1, 1] * 2
    assert [len(_first_token_marks(s)) for s in spans] == [0, 0, 1] * 2
    assert all(s.end_time >= s.start_time for s in spans)


def test_a_json_answer_of_known_length_gets_no_first_token_mark(server, lib):
    """A service that does not stream: its one body chunk comes with the end, so a
    first-token mark would report the whole exchange as the time to first token."""
    with tracer.instrument_httpx(lib.Client()) as client:
        with capture_spans() as spans:
            resp = client.post(server.url + "/v1/answer", json={"stream": False})
    assert resp.headers["content-length"] and resp.json()["choices"]
    span = _client_span(spans)
    assert _first_token_marks(span) == []
    assert attrs.GEN_AI_TIME_TO_FIRST_CHUNK not in span.attributes
    assert span.attributes[attrs.CHUNKS] >= 1
    _assert_propagated(server, span)
