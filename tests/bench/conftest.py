"""What the bench's tests share: an ASGI app served on loopback by real uvicorn."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import uvicorn

from tests.conftest import free_port, wait_http


@pytest.fixture
def serve_app() -> Iterator[Callable[[Any], str]]:
    """Start an ASGI app with uvicorn in a thread; its base URL once it answers. Every
    server started is stopped at the test's end."""
    servers = []

    def start(app: Any) -> str:
        port = free_port()
        srv = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
        thread = threading.Thread(target=srv.run, daemon=True)
        thread.start()
        wait_http(f"http://127.0.0.1:{port}/none")
        servers.append((srv, thread))
        return f"http://127.0.0.1:{port}"

    yield start
    for srv, thread in servers:
        srv.should_exit = True
        thread.join(timeout=10)
