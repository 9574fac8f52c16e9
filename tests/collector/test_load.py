"""64 senders of 4-8 MB bodies for 20 s against ``--max-memory 512MiB`` on loopback.

The collector's RSS stays under the limit plus :data:`MARGIN_MIB` (the process itself:
interpreter and libraries, the store's duplicate check, allocator slack), some
requests are refused with 503 and ``Retry-After`` and come back, and every span
acknowledged with 200 is in the store. Bounded: 20 s of sending, each request at most
60 s, every sender joined.
"""

from __future__ import annotations

import itertools
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.collector.payloads import Bodies
from tests.conftest import CollectorProcess

SENDERS = 64
SEND_S = 20.0
REQUEST_TIMEOUT_S = 60.0
MAX_MEMORY_MIB = 512
#: What the process holds besides requests in flight, at most (measured: about 100 MiB).
MARGIN_MIB = 160
BODY_SIZES = (4_000_000, 6_000_000, 8_000_000)


@dataclass
class Tally:
    acked: dict[int, int] = field(default_factory=dict)  # request number -> spans
    refused: int = 0
    refused_without_retry_after: int = 0
    failures: list[str] = field(default_factory=list)
    slowest_answer_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)


class PeakRss:
    """The highest RSS of a process, sampled every 50 ms."""

    def __init__(self, pid: int):
        self.status = Path(f"/proc/{pid}/status")
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            try:
                text = self.status.read_text()
            except OSError:
                return
            for line in text.splitlines():
                if line.startswith("VmRSS:"):
                    self.peak_kib = max(self.peak_kib, int(line.split()[1]))

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak_kib / 1024


def _sender(url: str, bodies: list[Bodies], numbers: Iterator[int], end: float, tally: Tally):
    headers = {"content-type": "application/x-protobuf"}
    with httpx.Client(timeout=REQUEST_TIMEOUT_S) as client:
        while time.monotonic() < end:
            number = next(numbers)
            made = bodies[number % len(bodies)]
            body = made.stamp(number)
            while time.monotonic() < end:  # the same body again after a refusal, as exporters do
                started = time.monotonic()
                try:
                    response = client.post(url, content=body, headers=headers)
                except httpx.HTTPError as exc:
                    with tally.lock:
                        tally.failures.append(f"{type(exc).__name__}: {exc}")
                    break
                with tally.lock:
                    tally.slowest_answer_s = max(tally.slowest_answer_s, time.monotonic() - started)
                if response.status_code == 200:
                    with tally.lock:
                        tally.acked[number] = made.spans
                    break
                if response.status_code in (429, 503):
                    retry_after = response.headers.get("retry-after")
                    with tally.lock:
                        tally.refused += 1
                        tally.refused_without_retry_after += retry_after is None
                    time.sleep(float(retry_after or 1))
                    continue
                with tally.lock:
                    tally.failures.append(f"{response.status_code}: {response.text[:200]}")
                break


@pytest.mark.integration
def test_64_senders_of_large_bodies_stay_within_max_memory_and_lose_nothing(tmp_path):
    bodies = [Bodies(size) for size in BODY_SIZES]
    store = tmp_path / "spans.db"
    proc = CollectorProcess(store, "--max-memory", f"{MAX_MEMORY_MIB}MiB")
    rss = PeakRss(proc.proc.pid)
    tally = Tally()
    numbers = itertools.count()
    end = time.monotonic() + SEND_S
    url = proc.endpoint + "/v1/traces"
    threads = [
        threading.Thread(target=_sender, args=(url, bodies, numbers, end, tally), daemon=True)
        for _ in range(SENDERS)
    ]
    try:
        for thread in threads:
            thread.start()
        deadline = end + REQUEST_TIMEOUT_S + 10
        for thread in threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        assert not any(t.is_alive() for t in threads), "a sender did not finish in time"
        health = proc.health()
        idle_mib = int(rss.status.read_text().split("VmRSS:")[1].split()[0]) / 1024
    finally:
        peak_mib = rss.stop()
        proc.stop()
    assert proc.proc.returncode == 0

    with sqlite3.connect(store) as db:
        stored = Counter(
            Bodies.number_of(t) for (t,) in db.execute("SELECT substr(trace_id, 1, 16) FROM spans")
        )
    acked_spans = sum(tally.acked.values())
    print(
        f"\npeak RSS {peak_mib:.0f} MiB (limit {MAX_MEMORY_MIB} + margin {MARGIN_MIB}), "
        f"{idle_mib:.0f} MiB once the senders were done; "
        f"peak reserved {health['peak_in_flight_bytes'] / 2**20:.0f} MiB; "
        f"{len(tally.acked)} requests ({acked_spans:,} spans) acknowledged, "
        f"{tally.refused} refused with 503/429, slowest answer {tally.slowest_answer_s:.1f} s"
    )
    assert tally.failures == []
    assert tally.acked, "nothing was acknowledged"
    assert tally.refused > 0 and tally.refused_without_retry_after == 0
    assert [n for n, spans in tally.acked.items() if stored[n] != spans] == []
    assert health["peak_in_flight_bytes"] <= MAX_MEMORY_MIB * 2**20
    assert peak_mib < MAX_MEMORY_MIB + MARGIN_MIB
