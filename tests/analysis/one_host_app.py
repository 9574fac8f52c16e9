"""A two-service streaming app, both services on one host, traced with hoptrace and
exported over OTLP: ``front`` streams what ``model`` streams to it.

    python -m tests.analysis.one_host_app model PORT ENDPOINT
    python -m tests.analysis.one_host_app front PORT ENDPOINT MODEL_URL
"""

from __future__ import annotations

import asyncio
import sys
import time

import httpx
import uvicorn
from fastapi import FastAPI
from fastapi.responses import StreamingResponse

import tracer

CHUNKS = 8
GAP_S = 0.01
TAIL_S = 0.002


def model_app() -> FastAPI:
    app = FastAPI()

    @app.get("/generate")
    async def generate() -> StreamingResponse:
        async def body():
            for i in range(CHUNKS):
                await asyncio.sleep(GAP_S)
                yield f"data: token {i}\n\n".encode()
            yield b"data: [DONE]\n\n"
            time.sleep(TAIL_S)  # bookkeeping after the last event (usage, logs)

        return StreamingResponse(body(), media_type="text/event-stream")

    return tracer.instrument_fastapi(app, stage="inference", excluded_urls="docs")


def front_app(model_url: str) -> FastAPI:
    app = FastAPI()
    client = tracer.instrument_httpx(httpx.AsyncClient(timeout=10))

    @app.get("/ask")
    async def ask() -> StreamingResponse:
        async def body():
            async with client.stream("GET", model_url + "/generate") as resp:
                async for line in resp.aiter_lines():
                    if line:
                        yield f"{line}\n\n".encode()
                    if line == "data: [DONE]":
                        break  # an OpenAI-style client stops at the last event

        return StreamingResponse(body(), media_type="text/event-stream")

    return tracer.instrument_fastapi(app, stage="gateway", excluded_urls="docs")


def main(argv: list[str]) -> None:
    role, port, endpoint = argv[0], int(argv[1]), argv[2]
    tracer.setup(role, endpoint=endpoint)
    app = model_app() if role == "model" else front_app(argv[3])
    try:
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
    finally:
        tracer.shutdown()


if __name__ == "__main__":
    main(sys.argv[1:])
