"""What tracing costs the chain: the same services traced and untraced, side by side.

Two chains run at once on loopback, one with the OpenTelemetry SDK on in every service
and one with ``OTEL_SDK_DISABLED=true``; a plain, untraced client sends them the same
streamed requests, so drifts of a shared, noisy machine fall on both: at concurrency 1
request by request, alternating (ABBA) between the chains, in rounds ("pairs") whose
spread shows the noise; at higher concurrency in interleaved pairs of runs (traced
first in one pair, untraced first in the next). The cost is the
difference of the two runs' latency percentiles, per request and per hop (the
gateway, app and model each add one server), and at concurrency > 1 the throughput
the traced chain loses. Spans go to the embedded collector, or with ``sink="ack"`` to
a receiver that only acknowledges, so the collector's CPU is not counted as the
tracer's. With ``sample_ratio``, the traced chain's services sample that share of the
requests (``OTEL_TRACES_SAMPLER=parentbased_traceidratio``: the consistent probability
sampler, docs/sampling.md); the others' spans are the SDK's non-recording ones.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np

from demo_app.chain import Chain

__all__ = [
    "HOPS",
    "Overhead",
    "PairResult",
    "ack_receiver",
    "alternate_requests",
    "measure_overhead",
    "services_cpu_s",
    "stream_requests",
]

#: Services a request passes through, each with its own tracing.
HOPS = 3
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_BODY = {
    "model": "sim-1",
    "messages": [{"role": "user", "content": "How much does tracing cost?"}],
    "max_tokens": 8,
    "temperature": 0.0,
    "stream": True,
}


@dataclass(frozen=True)
class PairResult:
    """One interleaved pair of runs: latency percentiles (ms) and throughput (req/s)."""

    traced_p50: float
    untraced_p50: float
    traced_p90: float
    untraced_p90: float
    traced_rps: float
    untraced_rps: float
    #: CPU time (user + system) per request of the three services together, span
    #: export included: robust where latency is not (None where /proc is missing).
    traced_cpu_ms: float | None = None
    untraced_cpu_ms: float | None = None


@dataclass(frozen=True)
class Overhead:
    """The pairs and what they say: medians over the pairs, with the spread."""

    concurrency: int
    requests: int
    sink: str
    pairs: tuple[PairResult, ...]
    exports: int = 0  # export requests the ack sink received (0 with the collector)

    def _deltas(self, key: str) -> list[float]:
        return [getattr(p, f"traced_{key}") - getattr(p, f"untraced_{key}") for p in self.pairs]

    def per_request_ms(self, key: str = "p50") -> float:
        """Median over the pairs of traced minus untraced latency (``p50`` or ``p90``)."""
        return statistics.median(self._deltas(key))

    def per_hop_ms(self, key: str = "p50") -> float:
        """:meth:`per_request_ms` divided by the hops."""
        return self.per_request_ms(key) / HOPS

    def spread_ms(self, key: str = "p50") -> tuple[float, float]:
        """The smallest and largest per-request difference over the pairs."""
        deltas = self._deltas(key)
        return min(deltas), max(deltas)

    def cpu_per_request_ms(self) -> float | None:
        """Median over the pairs of the CPU per request tracing adds to the services."""
        deltas = [
            p.traced_cpu_ms - p.untraced_cpu_ms
            for p in self.pairs
            if p.traced_cpu_ms is not None and p.untraced_cpu_ms is not None
        ]
        return statistics.median(deltas) if deltas else None

    def throughput_lost(self) -> float:
        """Median over the pairs of 1 - traced / untraced requests per second."""
        return statistics.median(1 - p.traced_rps / p.untraced_rps for p in self.pairs)


@contextmanager
def ack_receiver(on_export: Callable[[int], None] | None = None) -> Iterator[str]:
    """An OTLP/HTTP endpoint that reads each request and answers 200, storing nothing;
    ``on_export(bytes)`` is told of each request."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                if on_export is not None:
                    on_export(length)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\n"
                    b"content-length: 0\r\n\r\n"
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            writer.close()

    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(asyncio.start_server(handle, "127.0.0.1", 0))
    port = server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, name="hoptrace-ack", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:

        async def close() -> None:
            server.close()
            await server.wait_closed()

        asyncio.run_coroutine_threadsafe(close(), loop).result(timeout=5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        loop.close()


async def _one(client: httpx.AsyncClient, url: str, headers: dict[str, str]) -> float:
    """One streamed request, read to its end: its latency (ms)."""
    started = time.perf_counter()
    async with client.stream("POST", url, json=_BODY, headers=headers) as resp:
        async for _ in resp.aiter_raw():
            pass
        if resp.status_code != 200:
            raise RuntimeError(f"the chain answered {resp.status_code}")
    return (time.perf_counter() - started) * 1000


async def alternate_requests(targets: list[tuple[str, str]], requests: int) -> list[list[float]]:
    """Latencies (ms) of ``requests`` streamed requests to each (url, key) target, one at
    a time, alternating request by request (ABBA: A first in one round, B in the next),
    so that whatever else the machine does falls on both within milliseconds."""
    latencies: list[list[float]] = [[] for _ in targets]
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    clients = [httpx.AsyncClient(timeout=60, limits=limits) for _ in targets]
    try:
        for n in range(requests):
            order = range(len(targets)) if n % 2 == 0 else reversed(range(len(targets)))
            for i in order:
                url, key = targets[i]
                headers = {"authorization": f"Bearer {key}"}
                latencies[i].append(await _one(clients[i], url, headers))
    finally:
        for client in clients:
            await client.aclose()
    return latencies


async def stream_requests(
    url: str, key: str, requests: int, concurrency: int
) -> tuple[list[float], float]:
    """Latencies (ms) of ``requests`` streamed requests and the wall time (s)."""
    latencies: list[float] = []
    left = requests
    headers = {"authorization": f"Bearer {key}"}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                latencies.append(await _one(client, url, headers))

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return latencies, time.perf_counter() - started


def measure_overhead(
    *,
    requests: int = 300,
    warmup: int = 20,
    pairs: int = 5,
    concurrency: int = 1,
    sink: str = "collector",
    profile: str = "loopback",
    progress: Callable[[int, int], None] | None = None,
    sample_ratio: float | None = None,
) -> Overhead:
    """Measure what tracing adds to the demo chain (see the module docstring).

    Raises:
        ValueError: a bad count, sink or sample ratio.
    """
    if requests < 1 or pairs < 1 or concurrency < 1 or warmup < 0:
        raise ValueError("requests, pairs and concurrency must be positive, warmup not negative")
    if sample_ratio is not None and not 0 <= sample_ratio <= 1:
        raise ValueError(f"sample_ratio must be in 0..1, got {sample_ratio!r}")
    if sink not in ("collector", "ack"):
        raise ValueError(f"sink must be 'collector' or 'ack', got {sink!r}")
    received: list[int] = []
    with (
        tempfile.TemporaryDirectory(prefix="hoptrace-overhead-") as tmp,
        _sink(sink, received.append) as endpoint,
    ):
        # The SDK's own batching (512 spans or 5 s), as in production: a batch left at
        # the end of one run is exported, and counted, in the next run of that chain.
        batching = {"OTEL_BSP_SCHEDULE_DELAY": "5000", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "512"}
        if sample_ratio is not None:
            batching["OTEL_TRACES_SAMPLER"] = "parentbased_traceidratio"
            batching["OTEL_TRACES_SAMPLER_ARG"] = repr(sample_ratio)
        traced = Chain(
            Path(tmp) / "traced.db", profile=profile, otlp_endpoint=endpoint, env=batching
        )
        untraced = Chain(Path(tmp) / "untraced.db", profile=profile, traced=False)
        with traced, untraced:
            chains = {"traced": traced, "untraced": untraced}
            for chain in chains.values():
                url = chain.base_url + "/chat/completions"
                asyncio.run(stream_requests(url, chain.api_key, warmup, concurrency))
            results = []
            for n in range(pairs):
                cpu: dict[str, float | None] = {}
                before = {name: services_cpu_s(chain) for name, chain in chains.items()}
                if concurrency == 1:
                    # One request at a time: alternate the chains request by request.
                    started = time.perf_counter()
                    lat = asyncio.run(
                        alternate_requests(
                            [
                                (c.base_url + "/chat/completions", c.api_key)
                                for c in chains.values()
                            ],
                            requests,
                        )
                    )
                    wall = time.perf_counter() - started
                    # Each chain's share of the wall time: its own requests' latencies.
                    got = {
                        name: (lat[i], wall * sum(lat[i]) / (sum(lat[0]) + sum(lat[1])))
                        for i, name in enumerate(chains)
                    }
                else:
                    order = ["traced", "untraced"] if n % 2 == 0 else ["untraced", "traced"]
                    got = {}
                    for name in order:
                        chain = chains[name]
                        before[name] = services_cpu_s(chain)
                        got[name] = asyncio.run(
                            stream_requests(
                                chain.base_url + "/chat/completions",
                                chain.api_key,
                                requests,
                                concurrency,
                            )  # fmt: skip
                        )
                        cpu[name] = _per_request(before[name], services_cpu_s(chain), requests)
                for name, chain in chains.items():
                    if name not in cpu:
                        cpu[name] = _per_request(before[name], services_cpu_s(chain), requests)
                (t_lat, t_wall), (u_lat, u_wall) = got["traced"], got["untraced"]
                t50, t90 = np.percentile(t_lat, [50, 90])
                u50, u90 = np.percentile(u_lat, [50, 90])
                results.append(
                    PairResult(
                        float(t50),
                        float(u50),
                        float(t90),
                        float(u90),
                        requests / t_wall,
                        requests / u_wall,
                        cpu["traced"],
                        cpu["untraced"],
                    )  # fmt: skip
                )
                if progress is not None:
                    progress(n + 1, pairs)
    return Overhead(concurrency, requests, sink, tuple(results), len(received))


def _per_request(before: float | None, after: float | None, requests: int) -> float | None:
    return None if before is None or after is None else (after - before) / requests * 1000


def services_cpu_s(chain: Chain) -> float | None:
    """User + system CPU seconds the chain's services have used (Linux /proc)."""
    total = 0.0
    try:
        for pid in chain.service_pids.values():
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    except OSError:
        return None
    return total


@contextmanager
def _sink(kind: str, on_export: Callable[[int], None]) -> Iterator[str | None]:
    if kind == "ack":
        with ack_receiver(on_export) as endpoint:
            yield endpoint
    else:
        yield None
