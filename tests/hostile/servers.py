"""Run an ASGI app for real on a loopback port, in a thread of the test process."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from collector import free_port


@contextmanager
def serving(app: Any, deadline_s: float = 10.0) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 until the block ends; yields its base URL."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    end = time.monotonic() + deadline_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > end:
            raise RuntimeError(f"the test server did not start on port {port}")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        server.force_exit = True
        thread.join(timeout=10)
