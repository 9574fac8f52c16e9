"""Capture spans in memory, for your own tests of instrumented code.

    from tracer.testing import capture_spans

    def test_auth_is_a_stage():
        with capture_spans() as spans:
            verify_key("k")
        assert spans.stages() == ["auth"]

If no SDK tracer provider is installed, one is installed (once, globally) with no
exporter; a provider installed by the application is used as it is.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

from tracer import attributes as attrs

__all__ = ["CapturedSpans", "call_asgi", "capture_spans"]


class CapturedSpans:
    """The spans that finished while :func:`capture_spans` was open, in end order."""

    def __init__(self) -> None:
        self._spans: list[ReadableSpan] = []
        self._lock = threading.Lock()

    def _add(self, span: ReadableSpan) -> None:
        with self._lock:
            self._spans.append(span)

    @property
    def spans(self) -> list[ReadableSpan]:
        """A copy of the finished spans."""
        with self._lock:
            return list(self._spans)

    def named(self, name: str) -> ReadableSpan:
        """The one finished span called ``name``; raises LookupError if not exactly one."""
        found = [s for s in self.spans if s.name == name]
        if len(found) != 1:
            raise LookupError(f"expected one span named {name!r}, found {len(found)}")
        return found[0]

    def stages(self) -> list[str]:
        """The ``hoptrace.stage`` of each finished span that has one, in end order."""
        return [
            str(s.attributes[attrs.STAGE])
            for s in self.spans
            if s.attributes and attrs.STAGE in s.attributes
        ]

    def __len__(self) -> int:
        return len(self.spans)


class _Dispatch(SpanProcessor):
    def __init__(self) -> None:
        self.targets: list[CapturedSpans] = []
        self.lock = threading.Lock()

    def on_end(self, span: ReadableSpan) -> None:
        with self.lock:
            targets = list(self.targets)
        for target in targets:
            target._add(span)


_dispatch = _Dispatch()
_installed_on: object | None = None
_install_lock = threading.Lock()


def _ensure_installed() -> None:
    global _installed_on
    with _install_lock:
        provider = trace.get_tracer_provider()
        if _installed_on is provider:
            return
        if not isinstance(provider, TracerProvider):
            trace.set_tracer_provider(TracerProvider())
            provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            raise RuntimeError(
                f"capture_spans needs an OpenTelemetry SDK TracerProvider, found {provider!r}"
            )
        provider.add_span_processor(_dispatch)
        _installed_on = provider


@contextmanager
def capture_spans() -> Iterator[CapturedSpans]:
    """Collect every span that ends inside the block."""
    _ensure_installed()
    captured = CapturedSpans()
    with _dispatch.lock:
        _dispatch.targets.append(captured)
    try:
        yield captured
    finally:
        with _dispatch.lock:
            _dispatch.targets.remove(captured)


async def call_asgi(app: Any, scope: dict[str, Any], body: bytes) -> list[dict[str, Any]]:
    """Send one HTTP request to the ASGI ``app`` in this process (no server, no socket):
    ``scope`` as a server builds it, ``body`` in one message. Returns the messages the
    app sent (``http.response.start`` first). After the body the request stays open, as
    a client that waits for the answer keeps it."""
    sent: list[dict[str, Any]] = []
    done = False

    async def receive() -> dict[str, Any]:
        nonlocal done
        if not done:
            done = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # no disconnect: the app answers first
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(dict(scope), receive, send)
    return sent
