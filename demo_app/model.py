"""The model server: an OpenAI-compatible chat endpoint that simulates a model.

A request waits for one of ``BATCH_SLOTS`` engine slots (the queue), then prefill takes
``prefill_ms`` and each output token ``per_token_ms``, both divided by the server's
speedup (the "100x faster model"), with jitter; a configurable share of requests fails
(500 before the first token, or mid-stream). Like vLLM's ``llm_request`` span, the
inference span reports its queue, prefill and decode time and its time to first token
in ``gen_ai.latency.*`` attributes (seconds), so hoptrace splits it into
``inference.queue``, ``inference.prefill`` and ``inference.decode``.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, StreamingResponse

import tracer
from demo_app.common import UNTRACED_URLS, NetworkLeg, log_event, sse
from demo_app.profiles import Profile

__all__ = ["BATCH_SLOTS", "POOL", "create_model_app"]

WORDS = ("the chain around the model decides what users feel , not the model alone .").split()
#: Requests the simulated engine serves at once; more wait in its queue.
BATCH_SLOTS = 16
#: ``hoptrace.pool.name`` of the engine's slots, recorded on the inference span.
POOL = "engine"


class ModelState:
    """Mutable settings of the simulated model (changed through /admin/config)."""

    def __init__(self, profile: Profile, speedup: float, failure_rate: float, seed: int = 1):
        self.profile = profile
        self.speedup = speedup
        self.failure_rate = failure_rate
        self.midstream_failure_rate = 0.0
        self.rng = random.Random(seed)
        self.slots = asyncio.Semaphore(BATCH_SLOTS)

    def scaled(self, ms: float) -> float:
        spread = self.profile.jitter
        return ms * (1 + self.rng.uniform(-spread, spread)) / self.speedup / 1000


async def _until(due: float) -> None:
    """Sleep until ``due`` (``time.perf_counter`` seconds), not for a time: the event
    loop's timers wake on the millisecond at best (epoll waits in whole milliseconds,
    rounded up), so a 0.15 ms token slept one at a time takes 1 ms. Kept to deadlines,
    a fast model's tokens keep to their schedule on the whole, a few at a time."""
    left = due - time.perf_counter()
    if left > 0:
        await asyncio.sleep(left)


def create_model_app(profile: Profile, speedup: float = 1.0, failure_rate: float = 0.0) -> Any:
    """The model server's ASGI app (instrumented, with its network leg in front)."""
    state = ModelState(profile, speedup, failure_rate)
    app = FastAPI(title="hoptrace demo model")
    app.state.model = state

    @app.post("/admin/config")
    async def configure(body: dict[str, Any]) -> dict[str, Any]:
        for key in ("speedup", "failure_rate", "midstream_failure_rate"):
            if key in body:
                value = float(body[key])
                if key == "speedup" and value <= 0:
                    raise HTTPException(400, "speedup must be positive")
                setattr(state, key, value)
        return {
            "speedup": state.speedup,
            "failure_rate": state.failure_rate,
            "midstream_failure_rate": state.midstream_failure_rate,
        }

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        body = await request.json()
        model = str(body.get("model") or "sim-1")
        max_tokens = int(body.get("max_tokens") or 32)
        messages = body.get("messages") or []
        input_tokens = sum(len(str(m.get("content", "")).split()) for m in messages) + 4
        stream = bool(body.get("stream"))
        if state.rng.random() < state.failure_rate:
            log_event("model_error", status=500, model=model)
            raise HTTPException(500, "simulated model failure")
        fail_midway = state.rng.random() < state.midstream_failure_rate
        rid = f"chatcmpl-{uuid.uuid4().hex[:12]}"

        @tracer.stage(
            "inference",
            span_name=f"generate {model}",
            **tracer.genai_request(
                "chat", model, provider="hoptrace-sim", max_tokens=max_tokens, stream=stream
            ),
        )
        async def generate() -> AsyncIterator[str]:
            arrived = time.perf_counter()
            async with state.slots:
                scheduled = time.perf_counter()
                tracer.record_pool(POOL, BATCH_SLOTS, round((scheduled - arrived) * 1e9))
                due = scheduled + state.scaled(state.profile.prefill_ms)
                await _until(due)
                first = last = scheduled
                for i in range(max_tokens):
                    if fail_midway and i == max_tokens // 2:
                        raise RuntimeError("simulated failure mid-stream")
                    if i:
                        due += state.scaled(state.profile.per_token_ms)
                        await _until(due)
                    last = time.perf_counter()
                    if not i:
                        first = last
                    yield WORDS[i % len(WORDS)] + " "
            tracer.record_engine_latency(
                time_to_first_token_s=first - arrived,
                queue_s=scheduled - arrived,
                prefill_s=first - scheduled,
                decode_s=last - first,
                e2e_s=time.perf_counter() - arrived,
            )
            tracer.record_usage(
                input_tokens=input_tokens,
                output_tokens=max_tokens,
                response_model=model,
                finish_reasons=["length"],
            )

        if not stream:
            started = time.perf_counter()
            text = "".join([t async for t in generate()])
            log_event(
                "model_done",
                model=model,
                tokens=max_tokens,
                latency_ms=round((time.perf_counter() - started) * 1000, 1),
            )
            return JSONResponse(
                {
                    "id": rid,
                    "object": "chat.completion",
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "length",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": input_tokens,
                        "completion_tokens": max_tokens,
                        "total_tokens": input_tokens + max_tokens,
                    },
                }
            )

        async def events() -> AsyncIterator[bytes]:
            try:
                async for token in generate():
                    yield sse(
                        {
                            "id": rid,
                            "object": "chat.completion.chunk",
                            "model": model,
                            "choices": [{"index": 0, "delta": {"content": token}}],
                        }
                    )
                yield sse(
                    {
                        "id": rid,
                        "object": "chat.completion.chunk",
                        "model": model,
                        "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
                        "usage": {"prompt_tokens": input_tokens, "completion_tokens": max_tokens},
                    }
                )
                yield sse("[DONE]")
            except RuntimeError as exc:
                log_event("model_error", status=500, model=model, midstream=True)
                yield sse({"error": {"message": str(exc), "type": "server_error"}})

        return StreamingResponse(events(), media_type="text/event-stream")

    tracer.instrument_fastapi(app, stage="inference", excluded_urls=UNTRACED_URLS)
    return NetworkLeg(app, profile.net_app_model_ms, profile)
