"""The client: builds a chat request, calls the gateway, consumes the stream, renders.

Its root span is stage ``client`` (with ``hoptrace.run`` naming the run) and carries
the first-token mark when the first content chunk arrives.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

import tracer
from tracer import attributes as attrs
from tracer._sse import aiter_sse_data
from tracer.instrument.host import record_client_load

__all__ = ["RequestResult", "run_requests"]

RUN_ATTRIBUTE = attrs.RUN
PROMPT = "Why does a 100x faster model not make my chat 100x faster? Explain latency."


@dataclass(frozen=True)
class RequestResult:
    """One request as the client saw it."""

    trace_id: str
    status: int
    e2e_ms: float
    ttfc_ms: float | None
    chunks: int
    error: str | None = None


async def _one(
    client: httpx.AsyncClient,
    base_url: str,
    api_key: str,
    run: str,
    stream: bool,
    max_tokens: int,
    render_ms: float,
    concurrency: int = 1,
) -> RequestResult:
    body = {
        "model": "sim-1",
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "stream": stream,
    }
    headers = {"authorization": f"Bearer {api_key}"}
    tags: dict[str, str | int] = {RUN_ATTRIBUTE: run, attrs.BENCH_CONCURRENCY: concurrency}
    with tracer.stage("client", span_name="chat request", **tags) as span:
        cpu_at_start = time.process_time_ns()
        start_ns = time.time_ns()
        started = time.perf_counter()
        ttfc = None
        chunks = 0
        error = None
        trace_id = format(span.get_span_context().trace_id, "032x")
        try:
            if stream:
                async with client.stream(
                    "POST", base_url + "/chat/completions", json=body, headers=headers
                ) as resp:
                    status = resp.status_code
                    async for data in aiter_sse_data(resp.aiter_lines()):
                        if data.strip() == "[DONE]":
                            continue
                        chunk = json.loads(data)
                        if "error" in chunk:
                            error = chunk["error"].get("message")
                            continue
                        delta = (chunk.get("choices") or [{}])[0].get("delta") or {}
                        if delta.get("content"):
                            if ttfc is None:
                                ttfc = (time.perf_counter() - started) * 1000
                                tracer.mark_first_token(span, start_ns)
                            chunks += 1
            else:
                resp = await client.post(base_url + "/chat/completions", json=body, headers=headers)
                status = resp.status_code
                chunks = 1 if status == 200 else 0
        except httpx.HTTPError as exc:
            status, error = 0, f"{type(exc).__name__}: {exc}"
        span.set_attribute(attrs.HTTP_RESPONSE_STATUS_CODE, status)
        record_client_load(span, cpu_at_start)  # what a load model reads (docs/whatif.md)
        if status == 200 and error is None:
            with tracer.stage("client", span_name="render"):
                await asyncio.sleep(render_ms / 1000)
        e2e = (time.perf_counter() - started) * 1000
    return RequestResult(trace_id, status, e2e, ttfc, chunks, error)


async def run_requests_async(
    base_url: str,
    api_key: str,
    *,
    requests: int | None = None,
    concurrency: int,
    run: str,
    stream: bool = True,
    max_tokens: int = 32,
    render_ms: float = 20.0,
    duration_s: float | None = None,
    on_done: Callable[[RequestResult], None] | None = None,
) -> list[RequestResult]:
    """Send ``requests`` requests, ``concurrency`` at a time.

    With ``duration_s`` instead, each of the ``concurrency`` clients keeps sending
    until the time is up (a request in flight at the deadline is finished).
    """
    if (requests is None) == (duration_s is None):
        raise ValueError("give exactly one of requests and duration_s")
    results: list[RequestResult] = []
    queue = list(range(requests or 0))
    deadline = time.monotonic() + (duration_s or 0.0)

    def more() -> bool:
        if duration_s is not None:
            return time.monotonic() < deadline
        if queue:
            queue.pop()
            return True
        return False

    async with tracer.instrument_httpx(httpx.AsyncClient(timeout=120)) as client:

        async def worker() -> None:
            while more():
                result = await _one(
                    client, base_url, api_key, run, stream, max_tokens, render_ms, concurrency
                )
                results.append(result)
                if on_done is not None:
                    on_done(result)

        await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
    return results


def run_requests(base_url: str, api_key: str, **kwargs: object) -> list[RequestResult]:
    """Blocking wrapper of :func:`run_requests_async`."""
    return asyncio.run(run_requests_async(base_url, api_key, **kwargs))  # type: ignore[arg-type]
