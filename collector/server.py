"""Run the receiver: in the foreground (``hoptrace collect``) or in a background thread."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from pathlib import Path

import uvicorn

from collector.receiver import DEFAULT_MAX_BODY_BYTES, OtlpReceiver
from collector.store import SpanStore
from tracer._errors import ReceiverError

__all__ = ["BackgroundCollector", "free_port", "serve"]

_logger = logging.getLogger(__name__)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _config(app: OtlpReceiver, host: str, port: int) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=5,
    )


def serve(
    store_path: str | Path,
    *,
    host: str = "127.0.0.1",
    port: int = 4318,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    token: str | None = None,
    keep_content: bool = False,
) -> None:
    """Receive OTLP/HTTP on ``host:port`` into the store until interrupted.

    Prompt and completion attributes are dropped before spans are stored unless
    ``keep_content`` is true (see :class:`OtlpReceiver`).
    """
    store = SpanStore(store_path, create=True)
    app = OtlpReceiver(store, max_body_bytes=max_body_bytes, token=token, keep_content=keep_content)
    server = uvicorn.Server(_config(app, host, port))
    try:
        server.run()
    finally:
        app.close()
        store.close()
    if not server.started:
        raise ReceiverError(
            f"could not listen on {host}:{port}; is another collector running? "
            "Pick another port with --port"
        )


class BackgroundCollector:
    """The receiver in a thread of this process, for the demo and for tests.

    Usage::

        with BackgroundCollector(store_path) as collector:
            tracer.setup(endpoint=collector.endpoint)

    ``keep_content=True`` stores prompt and completion attributes too; by default they
    are dropped (see :class:`OtlpReceiver`).
    """

    def __init__(
        self,
        store_path: str | Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        token: str | None = None,
        keep_content: bool = False,
    ):
        self.host = host
        self.port = port or free_port(host)
        self.store = SpanStore(store_path, create=True)
        self.app = OtlpReceiver(
            self.store, max_body_bytes=max_body_bytes, token=token, keep_content=keep_content
        )
        self._server = uvicorn.Server(_config(self.app, host, self.port))
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._server.serve()), name="hoptrace-collector", daemon=True
        )

    @property
    def endpoint(self) -> str:
        """The OTLP/HTTP base URL, e.g. ``http://127.0.0.1:4318``."""
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 10.0) -> BackgroundCollector:
        """Start serving; returns when the port accepts connections."""
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise ReceiverError(f"the collector did not start on {self.host}:{self.port}")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving and commit what was received."""
        self._server.should_exit = True
        self._thread.join(timeout=15)
        self.app.close()
        self.store.close()

    def __enter__(self) -> BackgroundCollector:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
