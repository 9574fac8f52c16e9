"""Uploads that trickle in cannot hold the collector: memory is held for the bytes that
arrived, and a body slower than the minimum rate is answered 408 and let go, while real
batches go on being stored."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import httpx

from collector import SpanStore
from collector.memory import request_cost
from tests.collector import bodies
from tests.conftest import CollectorProcess

MAX_BODY = 1_000_000
DRIPS = 10


def _drip(port: int, answers: list[bytes], stop: threading.Event) -> None:
    """Declare a body of MAX_BODY bytes, then send one byte every 0.2 s."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\ncontent-type: application/x-protobuf\r\n"
            + f"content-length: {MAX_BODY}\r\n\r\n".encode()
        )
        sock.settimeout(0.2)
        got = b""
        while not stop.is_set() and b"\r\n\r\n" not in got:
            try:
                sock.sendall(b"\n")
            except OSError:
                break
            try:
                data = sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                break
            if not data:
                break
            got += data
        answers.append(got)


def test_dripping_uploads_do_not_stop_real_batches(tmp_path: Path):
    # Memory for exactly the ten drips as the collector used to count them (by the
    # length they declare), and not one byte more.
    limit = DRIPS * request_cost(MAX_BODY, "protobuf") + request_cost(0, "protobuf")
    store = tmp_path / "spans.db"
    collector = CollectorProcess(
        store, "--max-body-bytes", str(MAX_BODY), "--max-memory", str(limit),
        "--body-timeout", "1.5",
    )  # fmt: skip
    answers: list[bytes] = []
    stop = threading.Event()
    drips = [
        threading.Thread(target=_drip, args=(collector.port, answers, stop), daemon=True)
        for _ in range(DRIPS)
    ]
    try:
        for t in drips:
            t.start()
        deadline = time.monotonic() + 10
        while collector.health()["in_flight_bytes"] < DRIPS * request_cost(0, "protobuf"):
            assert time.monotonic() < deadline, "the drips did not start"
            time.sleep(0.02)
        statuses = []
        for _ in range(5):  # real 512-span batches while the drips hold their connections
            body = bodies.proto_request(512).SerializeToString()
            answer = httpx.post(
                collector.endpoint + "/v1/traces", content=body, headers=bodies.PROTO, timeout=10
            )
            statuses.append(answer.status_code)
        started = time.monotonic()
        for t in drips:
            t.join(timeout=15)
        waited = time.monotonic() - started
        health = collector.health()
    finally:
        stop.set()
        collector.stop()
    assert statuses == [200] * 5
    assert len(answers) == DRIPS and all(a.startswith(b"HTTP/1.1 408") for a in answers), answers
    assert waited < 12  # cut at about 1.5 s after they began; uncut, the joins wait 15 s
    assert health["requests_too_slow"] == DRIPS and health["in_flight_bytes"] == 0
    with SpanStore(store) as opened:
        assert opened.count() == 5 * 512
