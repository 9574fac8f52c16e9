"""Stopping under load: every request in flight is answered, the store is closed."""

from __future__ import annotations

import itertools
import signal
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from collector.memory import request_cost
from tests.collector.payloads import Bodies
from tests.conftest import CollectorProcess

SENDERS = 8
#: A request begun this long before the signal has certainly reached the collector.
_IN_FLIGHT_GUARD_S = 0.2


@dataclass
class Sent:
    number: int
    started: float
    ended: float
    outcome: int | str  # the HTTP status, or the name of the transport error
    retry_after: str | None


def _sender(
    url: str,
    bodies: Bodies,
    numbers: Iterator[int],
    stop: threading.Event,
    log: list,
    pending: dict[int, float],
) -> None:
    with httpx.Client(timeout=30) as client:
        while not stop.is_set():
            number = next(numbers)  # itertools.count: one number per request, across threads
            started = time.monotonic()
            pending[number] = started
            try:
                response = client.post(
                    url,
                    content=bodies.stamp(number),
                    headers={"content-type": "application/x-protobuf"},
                )
                outcome: int | str = response.status_code
                retry_after = response.headers.get("retry-after")
            except httpx.HTTPError as exc:
                outcome, retry_after = type(exc).__name__, None
            log.append(Sent(number, started, time.monotonic(), outcome, retry_after))
            del pending[number]
            if outcome == 503:
                stop.wait(float(retry_after or 1))


@pytest.mark.parametrize(
    "signum",
    # SIGINT takes the same path (Ctrl-C); it runs with the integration tests.
    [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.integration)],
)
def test_stop_under_load_answers_every_request_and_closes_the_store(tmp_path, signum):
    store = tmp_path / "spans.db"
    proc = CollectorProcess(store)
    bodies = Bodies(2_000_000)
    numbers = itertools.count()
    stop = threading.Event()
    log: list[Sent] = []
    pending: dict[int, float] = {}  # requests sent and not yet answered: when each began
    url = proc.endpoint + "/v1/traces"
    threads = [
        threading.Thread(target=_sender, args=(url, bodies, numbers, stop, log, pending))
        for _ in range(SENDERS)
    ]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 30
        while not any(s.outcome == 200 for s in log):  # ingest is under way
            assert time.monotonic() < deadline
            time.sleep(0.05)
        backlog = 4 * request_cost(bodies.size, "protobuf")
        # Requests queued, unanswered, one of them sent long enough ago to be one of them.
        while proc.health()["in_flight_bytes"] < backlog or not any(
            time.monotonic() - t > 2 * _IN_FLIGHT_GUARD_S for t in list(pending.values())
        ):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        signalled = time.monotonic()
        proc.proc.send_signal(signum)
        stop.set()
        code = proc.proc.wait(timeout=30)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        proc.stop()
    stderr = proc.proc.stderr.read() if proc.proc.stderr else ""

    assert code == 0, stderr
    assert "Traceback" not in stderr and "CancelledError" not in stderr, stderr
    assert "store closed" in stderr
    assert not (tmp_path / "spans.db-wal").exists()  # closed: the WAL was checkpointed away

    in_flight = [
        s for s in log if s.started < signalled - _IN_FLIGHT_GUARD_S and s.ended > signalled
    ]
    assert in_flight, "no request was in flight at the signal"
    for sent in in_flight:
        assert sent.outcome in (200, 503), sent
        if sent.outcome == 503:
            assert sent.retry_after == "1"

    with sqlite3.connect(store) as db:
        stored = Counter(
            Bodies.number_of(t) for (t,) in db.execute("SELECT substr(trace_id, 1, 16) FROM spans")
        )
    acked = [s.number for s in log if s.outcome == 200]
    assert acked and all(stored[n] == bodies.spans for n in acked)
