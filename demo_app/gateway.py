"""The gateway: OpenAI-compatible ``POST /v1/chat/completions`` in front of the app.

Stage ``gateway`` on the server span; stage ``auth`` for the key check (constant-time
against stored SHA-256 hashes; 401), the per-key rate limit (token bucket with a
burst of RPS; 429 with Retry-After) and the per-key token quota (429). Requests are
forwarded with trace context; streams come back as SSE with heartbeats during long
waits, and an upstream failure mid-stream becomes an SSE error event. Every upstream
call has a timeout (504). With ``max_concurrency`` a request holds one of that many
workers from after the key check to the end of its answer; its server span records the pool
(``hoptrace.pool.name`` ``gateway``, ``.size``, ``.wait_ns``).

The key is checked before the body is read, so a caller without one learns nothing of
the request format; then the body is checked (``messages`` a list, ``max_tokens`` an
integer 1..4096, ``stream`` a boolean, at most :data:`MAX_BODY_BYTES`). Errors are
answered as OpenAI's API answers them: ``{"error": {"message", "type", "param",
"code"}}``, 400 for a bad body, 401 for a bad key.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import math
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
from fastapi import FastAPI, Header, HTTPException, Request
from fastapi.responses import JSONResponse, StreamingResponse

import tracer
from demo_app.common import UNTRACED_URLS, NetworkLeg, delay, log_event, sse
from demo_app.profiles import Profile

__all__ = ["POOL", "GatewayConfig", "create_gateway_app"]

#: ``hoptrace.pool.name`` of the worker pool ``--max-concurrency`` sizes.
POOL = "gateway"

#: The largest request body read, in bytes (413 past it).
MAX_BODY_BYTES = 1024 * 1024
#: ``max_tokens`` when a request gives none, and the most one may ask for.
DEFAULT_MAX_TOKENS = 32
MAX_TOKENS = 4096
_ERROR_TYPES = {
    401: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_exceeded",
    502: "upstream_error",
    504: "upstream_error",
}


def _error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    """An error as OpenAI's API writes one: ``{"error": {"message", "type", ...}}``."""
    code = "invalid_api_key" if status == 401 else None
    kind = _ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


class _BadRequest(HTTPException):
    """400 for a request body that is not a chat completion request."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(400, message)
        self.param = param


async def _read_body(request: Request) -> bytes:
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise HTTPException(413, f"request body is over {MAX_BODY_BYTES} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise HTTPException(413, f"request body is over {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _chat_body(raw: bytes) -> dict[str, Any]:
    """The request body, checked: a JSON object with a ``messages`` list of objects,
    ``max_tokens`` an integer 1..4096 (or absent), ``stream`` a boolean (or absent).

    Raises:
        _BadRequest: what is wrong, naming the field.
    """
    try:
        body = orjson.loads(raw)  # nests at most 1,024 levels: deeper is an error, not a crash
    except orjson.JSONDecodeError:
        raise _BadRequest("the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise _BadRequest("the body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise _BadRequest("messages must be a list of message objects", "messages")
    max_tokens = body.get("max_tokens")
    if max_tokens is not None and (type(max_tokens) is not int or not 0 < max_tokens <= MAX_TOKENS):
        raise _BadRequest(
            f"max_tokens must be an integer from 1 to {MAX_TOKENS}, got {max_tokens!r}"[:200],
            "max_tokens",
        )
    if body.get("stream") is not None and not isinstance(body["stream"], bool):
        raise _BadRequest("stream must be true or false", "stream")
    if body.get("model") is not None and not isinstance(body["model"], str):
        raise _BadRequest("model must be a string", "model")
    return body  # type: ignore[no-any-return]


@dataclass
class GatewayConfig:
    """Keys, limits and timeouts of the gateway."""

    api_keys: list[str]
    rate_limit_rps: float = 0.0  # 0: unlimited
    tokens_per_minute: int = 0  # 0: unlimited
    upstream_timeout_s: float = 30.0
    heartbeat_s: float = 5.0
    max_concurrency: int = 0  # 0: unlimited; else a worker pool of this size
    key_hashes: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.key_hashes = [hashlib.sha256(k.encode()).digest() for k in self.api_keys]


class _Bucket:
    def __init__(self, rate: float):
        self.rate = rate
        self.tokens = rate
        self.stamp = time.monotonic()

    def take(self) -> float:
        """0 when allowed, else seconds until a token is free."""
        now = time.monotonic()
        self.tokens = min(self.rate, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate


def create_gateway_app(profile: Profile, app_url: str, config: GatewayConfig) -> Any:
    """The gateway's ASGI app; ``app_url`` is the app service's base URL."""
    api = FastAPI(title="hoptrace demo gateway")
    client = tracer.instrument_httpx(
        httpx.AsyncClient(timeout=httpx.Timeout(config.upstream_timeout_s))
    )
    buckets: dict[bytes, _Bucket] = {}
    usage: dict[bytes, list[tuple[float, int]]] = {}
    pool = asyncio.Semaphore(config.max_concurrency) if config.max_concurrency else None

    @api.exception_handler(HTTPException)
    async def openai_error(request: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse(
            _error_body(exc.status_code, str(exc.detail), getattr(exc, "param", None)),
            status_code=exc.status_code,
            headers=exc.headers,
        )

    @tracer.stage("auth")
    async def authorize(authorization: str | None) -> bytes:
        await delay(profile.auth_ms, profile)
        presented = (authorization or "").removeprefix("Bearer ").strip()
        digest = hashlib.sha256(presented.encode()).digest()
        match = False
        for stored in config.key_hashes:  # every hash compared: constant time
            match |= hmac.compare_digest(digest, stored)
        if not presented or not match:
            raise HTTPException(
                401, "missing or invalid API key", headers={"WWW-Authenticate": "Bearer"}
            )
        if config.rate_limit_rps > 0:
            bucket = buckets.setdefault(digest, _Bucket(config.rate_limit_rps))
            wait = bucket.take()
            if wait > 0:
                raise HTTPException(
                    429,
                    "rate limit exceeded",
                    headers={"Retry-After": str(max(1, math.ceil(wait)))},
                )
        return digest

    def admit(digest: bytes, max_tokens: int) -> None:
        if config.tokens_per_minute > 0:
            now = time.monotonic()
            window = [(t, n) for t, n in usage.get(digest, []) if now - t < 60]
            if sum(n for _, n in window) + max_tokens > config.tokens_per_minute:
                retry = 60 - (now - window[0][0]) if window else 60
                raise HTTPException(
                    429,
                    "token quota exceeded",
                    headers={"Retry-After": str(max(1, math.ceil(retry)))},
                )
            window.append((now, max_tokens))
            usage[digest] = window

    @api.post("/v1/chat/completions")
    async def chat(request: Request, authorization: str | None = Header(None)) -> Any:
        digest = await authorize(authorization)  # the key first: strangers learn nothing
        body = _chat_body(await _read_body(request))
        admit(digest, body.get("max_tokens") or DEFAULT_MAX_TOKENS)
        if pool is not None:
            waited_ns = time.perf_counter_ns()
            await pool.acquire()
            # On the server span: it covers the time the worker is held.
            tracer.record_pool(POOL, config.max_concurrency, time.perf_counter_ns() - waited_ns)
        released = False

        def release() -> None:
            nonlocal released
            if pool is not None and not released:
                released = True
                pool.release()

        try:
            await delay(profile.gateway_ms, profile)
            url = app_url.rstrip("/") + "/generate"
            if not body.get("stream"):
                try:
                    resp = await client.post(url, json=body)
                except httpx.TimeoutException:
                    log_event("upstream_timeout", status=504)
                    raise HTTPException(504, "upstream timed out") from None
                except httpx.HTTPError as exc:
                    raise HTTPException(502, f"upstream unreachable: {exc}") from None
                log_event("forwarded", status=resp.status_code)
                return JSONResponse(resp.json(), status_code=resp.status_code)
            upstream = client.stream("POST", url, json=body)
            try:
                resp = await upstream.__aenter__()
            except httpx.TimeoutException:
                log_event("upstream_timeout", status=504)
                raise HTTPException(504, "upstream timed out") from None
            except httpx.HTTPError as exc:
                raise HTTPException(502, f"upstream unreachable: {exc}") from None
        except BaseException:
            release()
            raise

        async def relay() -> AsyncIterator[bytes]:
            chunks = resp.aiter_raw()
            pending: asyncio.Task[bytes] | None = None
            try:
                while True:
                    if pending is None:
                        pending = asyncio.ensure_future(chunks.__anext__())
                    done, _ = await asyncio.wait({pending}, timeout=config.heartbeat_s)
                    if not done:
                        yield b": keep-alive\n\n"
                        continue
                    try:
                        chunk = pending.result()
                    except StopAsyncIteration:
                        break
                    pending = None
                    yield chunk
            except httpx.HTTPError as exc:
                log_event("upstream_failed_midstream", status=502)
                yield sse(
                    {
                        "error": {
                            "message": f"upstream failed mid-stream: {type(exc).__name__}",
                            "type": "upstream_error",
                        }
                    }
                )
            finally:
                if pending is not None and not pending.done():
                    pending.cancel()
                await upstream.__aexit__(None, None, None)
                release()

        return StreamingResponse(
            relay(), status_code=resp.status_code, media_type="text/event-stream"
        )

    tracer.instrument_fastapi(api, stage="gateway", excluded_urls=UNTRACED_URLS)
    return NetworkLeg(api, profile.net_client_gateway_ms, profile)
