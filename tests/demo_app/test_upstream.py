"""``--upstream``: the app in front of another OpenAI-compatible server, untraced."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest

from demo_app.chain import Chain
from tests.conftest import free_port, wait_http
from tests.helpers import eventually
from tracer.analysis import load
from tracer.analysis.model.prepare import prepare
from tracer.spans import Warnings

# Boots real service processes on loopback ports: run with -m integration.
pytestmark = pytest.mark.integration


def test_chain_serves_from_an_external_untraced_model_server(tmp_path):
    # A stand-in for vLLM or llama.cpp: an OpenAI-compatible server that sends no spans.
    port = free_port()
    log = open(tmp_path / "external.log", "wb")  # noqa: SIM115
    external = subprocess.Popen(
        [sys.executable, "-m", "demo_app.serve_one", "model", "--port", str(port)]
        + ["--profile", "loopback"],
        stdout=log,
        stderr=log,
        env=dict(os.environ, OTEL_SDK_DISABLED="true"),
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/docs", proc=external)
        with Chain(
            tmp_path / "s.db", profile="loopback", upstream=f"http://127.0.0.1:{port}/v1"
        ) as chain:
            assert chain.model_url == f"http://127.0.0.1:{port}/v1"
            assert len(chain._procs) == 2  # gateway and app: no simulated model started
            headers = {"authorization": f"Bearer {chain.api_key}"}
            body = {"model": "llama-3-8b", "messages": [{"role": "user", "content": "hi"}]}
            answers = [
                httpx.post(
                    chain.base_url + "/chat/completions",
                    json={**body, "max_tokens": 6},
                    headers=headers,
                    timeout=30,
                )
                for _ in range(3)
            ]
            assert [a.status_code for a in answers] == [200, 200, 200]
            assert all(
                len(a.json()["choices"][0]["message"]["content"].split()) == 6 for a in answers
            )
            chats = eventually(
                lambda: {
                    t: spans
                    for t, spans in load([chain.collector.store.path]).traces.items()
                    if any(s.name == "POST /v1/chat/completions" for s in spans)
                    and {"gateway", "app"} <= {s.service for s in spans}
                },
                lambda found: len(found) == 3,
            )
    finally:
        external.terminate()
        external.wait(timeout=10)
        log.close()
    assert len(chats) == 3
    for trace_id, spans in chats.items():
        assert {s.service for s in spans} == {"gateway", "app"}  # the external one is silent
        trace = prepare(trace_id, spans, Warnings())
        assert trace is not None
        # The call out of the app is inference time (no remote child to make it a hop),
        # and the model name asked for is on the span.
        models = {s.attributes.get("gen_ai.request.model") for s in spans}
        assert "llama-3-8b" in models
        assert "inference" in trace.stage
    served = [
        json.loads(line)
        for line in (tmp_path / "external.log").read_text().splitlines()
        if line.startswith("{")
    ]
    assert sum(1 for e in served if e.get("event") == "model_done") == 3


def test_upstream_stream_without_a_space_after_data_colon_is_read(tmp_path):
    # The SSE format makes the space after "data:" optional; a server that leaves it out
    # (and sends a keep-alive comment) must stream through the app all the same.
    import threading

    import uvicorn
    from fastapi import FastAPI
    from fastapi.responses import StreamingResponse

    words = ["alpha", "beta", "gamma"]
    stand_in = FastAPI()

    @stand_in.post("/v1/chat/completions")
    async def chat() -> StreamingResponse:
        async def events():
            yield b": keep-alive\n\n"
            for w in words:
                chunk = {"choices": [{"index": 0, "delta": {"content": w + " "}}]}
                yield b"data:" + json.dumps(chunk).encode() + b"\n\n"
            yield b"data:[DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(stand_in, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_http(f"http://127.0.0.1:{port}/docs")
        with Chain(
            tmp_path / "s.db", profile="loopback", upstream=f"http://127.0.0.1:{port}/v1"
        ) as chain:
            body = {
                "model": "m",
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 3,
                "stream": True,
            }
            text = ""
            with httpx.stream(
                "POST",
                chain.base_url + "/chat/completions",
                json=body,
                headers={"authorization": f"Bearer {chain.api_key}"},
                timeout=30,
            ) as resp:
                assert resp.status_code == 200
                for line in resp.iter_lines():
                    if line.startswith("data: {"):
                        chunk = json.loads(line[6:])
                        assert "error" not in chunk, chunk
                        for choice in chunk.get("choices") or []:
                            text += (choice.get("delta") or {}).get("content") or ""
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    assert text.split() == words
