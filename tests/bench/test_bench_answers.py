"""``hoptrace bench`` against servers that answer wrongly: every malformed answer is a
counted ``protocol`` error with an example, ``--timeout`` bounds the whole request, and
the run always ends with a report."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading

import orjson
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.conftest import free_port, wait_http
from tracer.analysis.render import bench_dict
from tracer.bench import run_bench

SSE = "text/event-stream"
GOOD = {"choices": [{"index": 0, "delta": {"content": "hello "}}]}


def _sse(*events: object, done: bool = True) -> bytes:
    body = b"".join(
        b"data: " + (e if isinstance(e, bytes) else json.dumps(e).encode()) + b"\n\n"
        for e in events
    )
    return body + (b"data: [DONE]\n\n" if done else b"")


# Each shape: (path, media type, body). Streams unless the path says "plain".
SHAPES = {
    "list-event": (SSE, _sse([])),
    "string-event": (SSE, _sse("text")),
    "choice-number": (SSE, _sse({"choices": [5]})),
    "usage-number": (SSE, _sse(GOOD, {"choices": [], "usage": 7})),
    "delta-string": (SSE, _sse({"choices": [{"delta": "text"}]})),
    "content-number": (SSE, _sse({"choices": [{"delta": {"content": 3}}]})),
    "no-done": (SSE, _sse(GOOD, done=False)),
    "json-to-stream": ("application/json", json.dumps({"choices": []}).encode()),
    "done-only": (SSE, b"data: [DONE]\n\n"),
    "html-page": ("text/html", b"<html><body>Welcome</body></html>"),
    "plain-list": ("application/json", b"[1, 2]"),
    "plain-usage-string": (
        "application/json",
        json.dumps({"choices": [{"message": {"content": "hi"}}], "usage": "many"}).encode(),
    ),
    "plain-content-number": (
        "application/json",
        json.dumps({"choices": [{"message": {"content": 42}}]}).encode(),
    ),
}


async def _answer(request: Request) -> Response:
    shape = request.path_params["shape"]
    if shape == "drip":
        # A keep-alive comment every 0.3 s for 6 s: each read is quick, the whole is not.
        async def drip():
            for _ in range(20):
                yield b": keep-alive\n\n"
                await asyncio.sleep(0.3)
            yield _sse(GOOD)

        return StreamingResponse(drip(), media_type=SSE)
    media, body = SHAPES[shape]
    return Response(body, media_type=media)


@pytest.fixture(scope="module")
def server():
    app = Starlette(routes=[Route("/{shape}/v1/chat/completions", _answer, methods=["POST"])])
    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    wait_http(f"http://127.0.0.1:{port}/none")
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)


def _bench(url: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{free_port()}"  # nobody there
    return subprocess.run(
        [sys.executable, "-m", "tracer.cli", "bench", url, "--concurrency", "1",
         "--requests", "2", "--warmup", "0", "--format", "json", *args],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_malformed_answer_is_a_counted_protocol_error_with_an_example(server, shape):
    result = run_bench(
        f"{server}/{shape}/v1",
        levels=[1],
        requests=2,
        warmup=0,
        stream=not shape.startswith("plain"),
        timeout_s=10,
    )
    level = bench_dict(result)["levels"][0]
    assert level["ok"] == 0
    assert level["errors"] == {"protocol": 2}
    assert level["error_examples"]["protocol"]


def test_a_malformed_answer_through_the_command_ends_with_a_report(server):
    done = _bench(f"{server}/usage-number/v1")
    assert done.returncode == 1, done.stderr  # the report, then: nothing succeeded
    assert "Traceback" not in done.stderr
    level = orjson.loads(done.stdout)["levels"][0]
    assert level["errors"] == {"protocol": 2}
    assert "usage is 7" in level["error_examples"]["protocol"]


def test_timeout_bounds_the_whole_request_not_each_read(server):
    done = _bench(f"{server}/drip/v1", "--timeout", "1.5")
    assert done.returncode == 1, done.stderr  # the report, then: nothing succeeded
    level = orjson.loads(done.stdout)["levels"][0]
    assert level["errors"] == {"timeout": 2}
    assert "1.5 s" in level["error_examples"]["timeout"]
    assert level["e2e_ms"]["n"] == 0


def test_the_table_shows_one_example_per_failure(server):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{free_port()}"
    done = subprocess.run(
        [sys.executable, "-m", "tracer.cli", "bench", f"{server}/choice-number/v1",
         "--concurrency", "1", "--requests", "2", "--warmup", "0"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # the report, then: nothing succeeded
    assert "c=1 protocol: choices[0] is 5, not an object" in done.stdout
