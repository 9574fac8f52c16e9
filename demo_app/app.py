"""The app service: context, inference (with a three-tier fallback), postprocess, return.

Tiers: the primary model; on timeout, error or malformed output a fallback model;
then a cached or rule-based answer. The tier that served is the span attribute
``hoptrace.fallback_tier`` and fallbacks are counted.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from opentelemetry import trace

import tracer
from demo_app.common import UNTRACED_URLS, NetworkLeg, delay, log_event, sse
from demo_app.profiles import Profile
from tracer import attributes as attrs
from tracer._sse import aiter_sse_data

__all__ = ["create_app_app"]

DOCUMENTS = {
    "latency": "End-to-end latency is the sum of every hop on the critical path.",
    "amdahl": "Speeding up one stage helps only as much as that stage's share of the time.",
    "ttft": "Time to first token is what a user of a streaming chat feels first.",
    "network": "Every network hop costs a round trip, and TLS set-up costs more.",
}
EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")
TEMPLATE = "You are a helpful assistant. Context:\n{context}\n\nConversation:\n{history}"


class UpstreamFailure(Exception):
    """The model answered with an error, timed out, or returned malformed output."""


def _retrieve(query: str, k: int = 2) -> list[str]:
    words = set(query.lower().split())
    scored = sorted(DOCUMENTS.items(), key=lambda kv: -len(words & set(kv[1].lower().split())))
    return [text for _, text in scored[:k]]


def create_app_app(
    profile: Profile,
    model_url: str,
    *,
    fallback_model: str = "sim-small",
    timeout_s: float = 30.0,
) -> Any:
    """The app service's ASGI app; ``model_url`` is an OpenAI-style base (…/v1)."""
    app = FastAPI(title="hoptrace demo app")
    client = tracer.instrument_httpx(httpx.AsyncClient(timeout=timeout_s))
    counters = {"fallbacks": 0, "requests": 0}
    app.state.counters = counters
    cache: dict[str, str] = {}

    async def search(stage: str, ms: float) -> None:
        with tracer.stage(stage):
            await delay(ms, profile)

    @tracer.stage("context")
    async def build_context(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        await delay(profile.context_ms, profile)
        if profile.retrieval_ms or profile.keyword_ms:
            # A RAG chain: retrieval and keyword search at once, joined.
            await asyncio.gather(
                search("context.retrieval", profile.retrieval_ms),
                search("context.keyword", profile.keyword_ms),
            )
        last = str(messages[-1].get("content", "")) if messages else ""
        context = "\n".join(_retrieve(last))
        history = "\n".join(f"{m.get('role')}: {m.get('content')}" for m in messages[-6:])
        return [
            {"role": "system", "content": TEMPLATE.format(context=context, history=history)},
            *messages[-1:],
        ]

    async def call_model(
        model: str, messages: list[dict[str, Any]], max_tokens: int, stream: bool
    ) -> AsyncIterator[str]:
        body = {"model": model, "messages": messages, "max_tokens": max_tokens, "stream": stream}
        url = model_url.rstrip("/") + "/chat/completions"
        try:
            if not stream:
                resp = await client.post(url, json=body)
                if resp.status_code != 200:
                    raise UpstreamFailure(f"model answered {resp.status_code}")
                try:
                    payload = resp.json()
                    text = payload["choices"][0]["message"]["content"]
                    usage = payload.get("usage") or {}
                except (ValueError, KeyError, IndexError, TypeError) as exc:
                    raise UpstreamFailure("malformed model output") from exc
                tracer.record_usage(
                    input_tokens=usage.get("prompt_tokens"),
                    output_tokens=usage.get("completion_tokens"),
                )
                yield text
                return
            async with client.stream("POST", url, json=body) as resp:
                if resp.status_code != 200:
                    raise UpstreamFailure(f"model answered {resp.status_code}")
                events = aiter_sse_data(resp.aiter_lines())
                async for data in events:
                    if data.strip() == "[DONE]":
                        # To the body's end, so that the connection is kept for the next
                        # call (a response closed early closes its connection).
                        async for _ in events:
                            pass
                        return
                    try:
                        chunk = json.loads(data)
                    except ValueError as exc:
                        raise UpstreamFailure("malformed model output") from exc
                    if "error" in chunk:
                        raise UpstreamFailure(chunk["error"].get("message", "model error"))
                    if chunk.get("usage"):
                        tracer.record_usage(
                            input_tokens=chunk["usage"].get("prompt_tokens"),
                            output_tokens=chunk["usage"].get("completion_tokens"),
                        )
                    for choice in chunk.get("choices") or []:
                        text = (choice.get("delta") or {}).get("content")
                        if text:
                            yield text
        except httpx.TimeoutException as exc:
            raise UpstreamFailure("model timed out") from exc
        except httpx.HTTPError as exc:
            raise UpstreamFailure(f"model unreachable: {exc}") from exc

    async def one_call(
        model: str, messages: list[dict[str, Any]], max_tokens: int, stream: bool
    ) -> list[str]:
        """One more call of the model (a self-check round, a candidate), in its own
        inference span; its answer as the pieces it came in."""
        with tracer.stage(
            "inference",
            span_name=f"chat {model}",
            **tracer.genai_request("chat", model, max_tokens=max_tokens, stream=stream),
        ) as span:
            span.set_attribute(attrs.FALLBACK_TIER, "primary")
            return [t async for t in call_model(model, messages, max_tokens, stream)]

    async def infer(
        model: str, messages: list[dict[str, Any]], max_tokens: int, stream: bool, key: str
    ) -> AsyncIterator[str]:
        """Tiered inference: primary, fallback model, then cached or rule-based; with
        the profile's ``repeat``, self-check rounds before the answer; with its
        ``candidates``, that many calls at once, one answer kept once all are in."""
        for _ in range(profile.repeat - 1):
            try:
                await one_call(model, messages, max_tokens, stream)
            except UpstreamFailure as exc:  # a failed round is skipped
                log_event("self_check_failed", reason=str(exc))
        if profile.candidates > 1:
            got = await asyncio.gather(
                *(one_call(model, messages, max_tokens, stream) for _ in range(profile.candidates)),
                return_exceptions=True,
            )
            answers = [parts for parts in got if isinstance(parts, list) and parts]
            if answers:
                # The best candidate (the longest answer), sent in the pieces it came in,
                # as a single call's answer is: the client sees the same stream.
                best = max(answers, key=lambda parts: len("".join(parts)))
                cache[key] = "".join(best)
                for text in best:
                    yield text
                return
        tiers = [("primary", model), ("fallback_model", fallback_model)]
        for tier, name in tiers:
            sent_any = False
            with tracer.stage(
                "inference",
                span_name=f"chat {name}",
                **tracer.genai_request("chat", name, max_tokens=max_tokens, stream=stream),
            ) as span:
                span.set_attribute(attrs.FALLBACK_TIER, tier)
                try:
                    parts = []
                    async for text in call_model(name, messages, max_tokens, stream):
                        sent_any = True
                        parts.append(text)
                        yield text
                    cache[key] = "".join(parts)
                    trace.get_current_span().set_attribute(attrs.FALLBACK_TIER, tier)
                    return
                except UpstreamFailure as exc:
                    counters["fallbacks"] += 1
                    log_event("fallback", tier=tier, reason=str(exc))
                    span.set_attribute(attrs.FALLBACK_REASON, str(exc))
                    if sent_any:
                        raise  # part of the answer is out: do not mix two answers
        tier = "cached" if key in cache else "rule"
        with tracer.stage("inference", span_name="fallback answer") as span:
            span.set_attribute(attrs.FALLBACK_TIER, tier)
            yield cache.get(key) or "The model is unavailable right now; please try again."

    @tracer.stage("postprocess")
    async def postprocess(text: str) -> str:
        await delay(profile.postprocess_ms, profile)
        if not text.strip():
            raise UpstreamFailure("empty model output")
        return EMAIL.sub("[redacted]", text)

    @app.post("/generate")
    async def generate(request: Request) -> Any:
        counters["requests"] += 1
        body = await request.json()
        messages = body.get("messages") or []
        model = str(body.get("model") or "sim-1")
        max_tokens = int(body.get("max_tokens") or 32)
        stream = bool(body.get("stream"))
        key = json.dumps(messages[-1:], sort_keys=True)
        started = time.perf_counter()
        prompt = await build_context(messages)
        if not stream:
            text = "".join([t async for t in infer(model, prompt, max_tokens, False, key)])
            text = await postprocess(text)
            with tracer.stage("return"):
                await delay(profile.return_ms, profile)
                payload = {
                    "object": "chat.completion",
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "length",
                            "message": {"role": "assistant", "content": text},
                        }
                    ],
                }
            log_event(
                "generated", status=200, latency_ms=round((time.perf_counter() - started) * 1000, 1)
            )
            return JSONResponse(payload)

        @tracer.stage("return", span_name="stream answer")
        async def events() -> AsyncIterator[bytes]:
            parts = []
            try:
                async for text in infer(model, prompt, max_tokens, True, key):
                    clean = EMAIL.sub("[redacted]", text)
                    parts.append(clean)
                    yield sse(
                        {
                            "object": "chat.completion.chunk",
                            "model": model,
                            "choices": [{"index": 0, "delta": {"content": clean}}],
                        }
                    )
                await postprocess("".join(parts))
                await delay(profile.return_ms, profile)
                yield sse(
                    {
                        "object": "chat.completion.chunk",
                        "model": model,
                        "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
                    }
                )
                yield sse("[DONE]")
                log_event(
                    "generated",
                    status=200,
                    stream=True,
                    latency_ms=round((time.perf_counter() - started) * 1000, 1),
                )
            except UpstreamFailure as exc:
                log_event("generate_failed", status=502, reason=str(exc))
                yield sse(
                    {"error": {"message": f"upstream failed: {exc}", "type": "upstream_error"}}
                )

        return StreamingResponse(events(), media_type="text/event-stream")

    tracer.instrument_fastapi(app, stage="return", excluded_urls=UNTRACED_URLS)
    return NetworkLeg(app, profile.net_gateway_app_ms, profile)
