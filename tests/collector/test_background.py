"""The collector in a thread binds its port before it starts serving."""

from __future__ import annotations

import socket

import httpx
import pytest

from collector import BackgroundCollector
from tracer._errors import ReceiverError


def _holding(port: int = 0) -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


def test_a_picked_port_taken_before_the_start_is_picked_again_and_served(tmp_path):
    collector = BackgroundCollector(tmp_path / "s.db")
    picked = collector.port
    with _holding(picked) as holder:  # another server took the port since the pick
        with collector:
            assert collector.port != picked
            assert collector.endpoint == f"http://127.0.0.1:{collector.port}"
            got = httpx.get(f"{collector.endpoint}/healthz", timeout=5)
            assert got.status_code == 200 and got.json()["status"] == "ok"
        assert holder.getsockname()[1] == picked  # the other server keeps its port


def test_a_port_asked_for_that_is_taken_fails_with_one_line(tmp_path):
    with _holding() as holder:
        port = holder.getsockname()[1]
        collector = BackgroundCollector(tmp_path / "s.db", port=port)
        with pytest.raises(ReceiverError) as caught:
            collector.start()
        collector.stop()  # a collector that never started stops cleanly
    assert str(caught.value) == (
        f"port {port} is in use; stop what listens there or choose another port"
    )
