"""Streamed answers read to the body's end keep their connection: the bench and the demo's
app reuse their connections as OpenAI's client does, so that a run measures requests,
not a TCP handshake each (and never a handshake's one-second retry)."""

from __future__ import annotations

import asyncio
import time

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from demo_app.app import create_app_app
from demo_app.model import create_model_app
from demo_app.profiles import PROFILES
from tracer.bench import run, run_bench

CHUNK = b'data: {"choices": [{"index": 0, "delta": {"content": "hello "}}]}\n\n'


class _Clients:
    """An ASGI app's wrapper that records each request's client address."""

    def __init__(self, app) -> None:
        self.app, self.seen = app, []

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            self.seen.append(tuple(scope["client"]))
        await self.app(scope, receive, send)


def _chat(after_done_s: float = 0.0) -> Starlette:
    """A chat endpoint whose stream ends ``after_done_s`` after its ``[DONE]``."""

    async def answer(request: Request) -> StreamingResponse:
        await request.body()

        async def body():
            yield CHUNK + b"data: [DONE]\n\n"
            if after_done_s:
                await asyncio.sleep(after_done_s)

        return StreamingResponse(body(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", answer, methods=["POST"])])


def test_the_bench_keeps_its_connections(serve_app):
    server = _Clients(_chat())
    url = serve_app(server) + "/v1"
    server.seen.clear()  # the readiness probe's
    result = run_bench(url, levels=[2], requests=16, warmup=2)
    (level,) = result.levels
    assert len(level.ok) == 16
    # 18 requests by 2 clients over at most 2 connections; closed at [DONE], each
    # request opened one of its own (18).
    assert len(server.seen) == 18
    assert len(set(server.seen)) <= 2, sorted(set(server.seen))


def test_a_stream_held_open_past_its_done_is_closed_not_waited_for(serve_app):
    # The body ends 5 s after [DONE]: the bench reads on for DRAIN_S only, then closes
    # the connection as it did before, and the answer counts as it came.
    url = serve_app(_Clients(_chat(after_done_s=5.0))) + "/v1"
    started = time.monotonic()
    result = run_bench(url, levels=[1], requests=2, warmup=0)
    took = time.monotonic() - started
    (level,) = result.levels
    assert len(level.ok) == 2
    assert all(s.e2e_ms >= run.DRAIN_S * 1000 for s in level.ok)
    assert took < 2 * 5.0, took  # generous: two requests of DRAIN_S each and start-up


def test_the_demo_app_keeps_its_connection_to_the_model(serve_app):
    profile = PROFILES["loopback"]
    model = _Clients(create_model_app(profile))
    model_url = serve_app(model) + "/v1"
    app_url = serve_app(create_app_app(profile, model_url))
    model.seen.clear()

    async def ask() -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            for _ in range(6):
                body = {
                    "messages": [{"role": "user", "content": "hi"}],
                    "max_tokens": 4,
                    "stream": True,
                }
                async with client.stream("POST", app_url + "/generate", json=body) as resp:
                    assert resp.status_code == 200
                    assert "[DONE]" in "".join([t async for t in resp.aiter_text()])

    asyncio.run(ask())
    # Six calls of the model, one after another, over one connection; closed at
    # [DONE], six connections.
    assert len(model.seen) == 6
    assert len(set(model.seen)) == 1, model.seen
