"""Pieces the demo services share: delays, network-leg simulation, JSON logs, SSE."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import sys
import time
from typing import Any

from opentelemetry import trace

from demo_app.profiles import Profile

__all__ = ["UNTRACED_URLS", "NetworkLeg", "delay", "log_event", "setup_logging", "sse"]

#: Requests the services answer without a trace (``excluded_urls`` of the FastAPI
#: instrumentation, regular expressions searched in the URL): the chain's and docker
#: compose's readiness checks (``GET /docs``) and the demo's own settings calls, which
#: would otherwise fill the store with traces of no request a user made.
UNTRACED_URLS = "/docs$,/openapi.json$,/healthz$,/admin/"

_log = logging.getLogger("hoptrace.demo")


def setup_logging(service: str) -> None:
    """JSON log lines on stderr, one per event, with trace and span ids."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    _log.handlers[:] = [handler]
    _log.setLevel(logging.INFO)
    _log.propagate = False
    _log.service = service  # type: ignore[attr-defined]


def log_event(event: str, **fields: Any) -> None:
    """One structured log line; never prompt text or keys (callers pass none)."""
    ctx = trace.get_current_span().get_span_context()
    record = {
        "ts": round(time.time(), 6),
        "service": getattr(_log, "service", "demo"),
        "event": event,
        "trace_id": format(ctx.trace_id, "032x") if ctx.is_valid else None,
        "span_id": format(ctx.span_id, "016x") if ctx.is_valid else None,
        **fields,
    }
    _log.info(json.dumps(record, default=str))


async def delay(ms: float, profile: Profile, rng: random.Random | None = None) -> None:
    """Sleep ``ms`` with the profile's jitter."""
    if ms <= 0:
        return
    r = rng or random
    spread = profile.jitter
    await asyncio.sleep(ms * (1 + r.uniform(-spread, spread)) / 1000)


class NetworkLeg:
    """ASGI wrapper, outside the instrumentation, that adds one-way network latency.

    The request waits ``ms`` before the server sees it, and the end of the response
    waits ``ms`` after the server span ended: both count as network time in the
    caller's CLIENT span, as a real WAN hop would.
    """

    def __init__(self, app: Any, ms: float, profile: Profile):
        self.app = app
        self.ms = ms
        self.profile = profile

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self.ms <= 0 or scope.get("path", "").startswith("/admin"):
            await self.app(scope, receive, send)
            return
        await delay(self.ms, self.profile)
        held: list[dict[str, Any]] = []

        async def hold_last(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                held.append(message)
                return
            await send(message)

        await self.app(scope, receive, hold_last)
        await delay(self.ms, self.profile)
        for message in held:
            await send(message)


def sse(data: Any) -> bytes:
    """One server-sent event carrying JSON (or ``[DONE]``)."""
    text = data if isinstance(data, str) else json.dumps(data)
    return f"data: {text}\n\n".encode()
