"""A discrete-event simulation of requests through a chain under load
(``docs/whatif.md``).

What it models: clients that each send their next request when the last one is
answered (a closed loop of N clients, as ``hoptrace bench`` runs them) or requests
arriving at a rate (an open loop, Poisson); one host CPU of C cores shared by every
process of the chain, served by processor sharing (n busy requests each get
min(1, C/n) of a core); and pools served first come, first served (a gateway's
workers, an engine's slots). Each request follows its own list of steps: wait a
fixed time, use the CPU for some time, take a slot of a pool, give it back, or mark
its first token.

Our own and small (about 200 lines) rather than SimPy: processor sharing needs the
completion of every running burst recomputed whenever one starts or ends, which a
generic process framework does with interrupts; here it is one loop over a heap.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ACQUIRE", "CPU", "DELAY", "MARK", "RELEASE", "Simulated", "Step", "simulate"]

DELAY, CPU, ACQUIRE, RELEASE, MARK = "delay", "cpu", "acquire", "release", "mark"


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a request: ``DELAY`` or ``CPU`` for ``ns`` nanoseconds (CPU time at
    a full core), ``ACQUIRE``/``RELEASE`` a slot of ``pool``, or ``MARK`` its first token."""

    kind: str
    ns: float = 0.0
    pool: str = ""


@dataclass(frozen=True, slots=True)
class Simulated:
    """What the simulated requests measured, after the warm-up.

    ``e2e_ns`` and ``ttft_ns`` (None where a request marked no first token) per
    request in completion order; ``throughput_per_s`` is completions per second over
    the measured window; ``utilization`` the busy share of the CPU and of each pool.
    """

    e2e_ns: tuple[float, ...]
    ttft_ns: tuple[float | None, ...]
    throughput_per_s: float
    utilization: dict[str, float]


class _Request:
    __slots__ = ("steps", "at", "started", "first", "client")

    def __init__(self, steps: Sequence[Step], started: float, client: int) -> None:
        self.steps = steps
        self.at = 0
        self.started = started
        self.first: float | None = None
        self.client = client


class _Sim:
    """The event loop: a heap of (time, order, request), the CPU's running bursts and
    the pools' holders and queues."""

    def __init__(self, cores: float, pools: dict[str, int]) -> None:
        if not cores > 0:
            raise ValueError(f"cores must be positive, got {cores!r}")
        for name, size in pools.items():
            if size < 1:
                raise ValueError(f"pool {name!r} must have at least one slot, got {size!r}")
        self.now = 0.0
        self.cores = float(cores)
        self.heap: list[tuple[float, int, int, _Request | None]] = []
        self.order = 0
        # CPU: running bursts' remaining work, when they were last brought up to date
        self.running: dict[_Request, float] = {}
        self.updated = 0.0
        self.version = 0
        self.cpu_busy = 0.0  # core-ns used
        self.size = dict(pools)
        self.held = {name: 0 for name in pools}
        self.queue: dict[str, deque[_Request]] = {name: deque() for name in pools}
        self.pool_busy = {name: 0.0 for name in pools}
        self.pool_updated = {name: 0.0 for name in pools}

    def at(self, time: float, request: _Request | None, version: int = -1) -> None:
        self.order += 1
        heapq.heappush(self.heap, (time, self.order, version, request))

    # -- the CPU, processor sharing -------------------------------------------------
    def _rate(self) -> float:
        n = len(self.running)
        return 1.0 if n <= self.cores else self.cores / n

    def _catch_up(self) -> None:
        if self.running:
            done = (self.now - self.updated) * self._rate()
            for r in self.running:
                self.running[r] -= done
            self.cpu_busy += (self.now - self.updated) * min(len(self.running), self.cores)
        self.updated = self.now

    def _reschedule(self) -> None:
        self.version += 1
        if self.running:
            shortest = min(self.running.values())
            self.at(self.now + max(shortest, 0.0) / self._rate(), None, self.version)

    def cpu(self, request: _Request, ns: float) -> None:
        self._catch_up()
        self.running[request] = ns
        self._reschedule()

    def cpu_tick(self) -> list[_Request]:
        self._catch_up()
        # Done within a nanosecond: floats of a clock in ns cannot step finer.
        done = [r for r, left in self.running.items() if left <= 1.0]
        for r in done:
            del self.running[r]
        self._reschedule()
        return done

    # -- pools, first come first served --------------------------------------------
    def _pool_catch_up(self, name: str) -> None:
        self.pool_busy[name] += (self.now - self.pool_updated[name]) * self.held[name]
        self.pool_updated[name] = self.now

    def acquire(self, name: str, request: _Request) -> bool:
        if name not in self.size:
            return True  # a pool of unknown size: no limit
        self._pool_catch_up(name)
        if self.held[name] < self.size[name]:
            self.held[name] += 1
            return True
        self.queue[name].append(request)
        return False

    def release(self, name: str) -> None:
        if name not in self.size:
            return
        self._pool_catch_up(name)
        waiting = self.queue[name]
        if waiting:  # the slot passes to the first in line
            self.at(self.now, waiting.popleft())
        else:
            self.held[name] -= 1


def simulate(
    templates: Sequence[Sequence[Step]],
    *,
    cores: float,
    pools: dict[str, int] | None = None,
    clients: int | None = None,
    arrival_per_s: float | None = None,
    requests: int = 2000,
    warmup: int = 200,
    seed: int = 1,
) -> Simulated:
    """Run ``requests`` requests after ``warmup`` (not measured), each following a
    template picked at random, through a closed loop of ``clients`` or an open loop
    of ``arrival_per_s`` requests a second (exactly one of the two).

    Raises:
        ValueError: no templates, both or neither of ``clients`` and
            ``arrival_per_s``, or a non-positive size.
    """
    if not templates:
        raise ValueError("simulate needs at least one request template")
    if (clients is None) == (arrival_per_s is None):
        raise ValueError("give exactly one of clients (closed loop) and arrival_per_s")
    if clients is not None and clients < 1:
        raise ValueError(f"clients must be at least 1, got {clients!r}")
    if arrival_per_s is not None and not arrival_per_s > 0:
        raise ValueError(f"arrival_per_s must be positive, got {arrival_per_s!r}")
    rng = random.Random(seed)
    sim = _Sim(cores, pools or {})
    total = requests + warmup
    sent = 0
    e2e: list[float] = []
    ttft: list[float | None] = []
    window_start = 0.0

    def send(client: int) -> None:
        nonlocal sent
        sent += 1
        request = _Request(templates[rng.randrange(len(templates))], sim.now, client)
        sim.at(sim.now, request)

    if clients is not None:
        for c in range(min(clients, total)):
            send(c)
    else:
        gap = 1e9 / arrival_per_s  # type: ignore[operator]
        send(-1)
        sim.at(sim.now + rng.expovariate(1.0) * gap, None, -2)
    finished = 0
    while sim.heap and finished < total:
        time, _, version, request = heapq.heappop(sim.heap)
        sim.now = time
        if request is None:
            if version == -2:  # the next open-loop arrival
                if sent < total:
                    send(-1)
                    sim.at(sim.now + rng.expovariate(1.0) * gap, None, -2)
                continue
            if version != sim.version:
                continue  # a CPU completion computed before the bursts changed
            ready = sim.cpu_tick()
        else:
            ready = [request]
        for r in ready:
            while r.at < len(r.steps):
                step = r.steps[r.at]
                r.at += 1
                if step.kind == DELAY:
                    if step.ns > 0:
                        sim.at(sim.now + step.ns, r)
                        break
                elif step.kind == CPU:
                    if step.ns > 0:
                        sim.cpu(r, step.ns)
                        break
                elif step.kind == ACQUIRE:
                    if not sim.acquire(step.pool, r):
                        break  # woken when a slot passes to it
                elif step.kind == RELEASE:
                    sim.release(step.pool)
                elif step.kind == MARK:
                    if r.first is None:
                        r.first = sim.now
            else:
                finished += 1
                if finished > warmup:
                    e2e.append(sim.now - r.started)
                    ttft.append(None if r.first is None else r.first - r.started)
                elif finished == warmup:  # the measured window starts: busy time anew
                    window_start = sim.now
                    sim._catch_up()
                    sim.cpu_busy = 0.0
                    for name in sim.pool_busy:
                        sim._pool_catch_up(name)
                        sim.pool_busy[name] = 0.0
                if r.client >= 0 and sent < total:
                    send(r.client)
    sim._catch_up()
    for name in sim.pool_busy:
        sim._pool_catch_up(name)
    span = max(sim.now - window_start, 1e-9)
    utilization = {"cpu": sim.cpu_busy / (sim.cores * span)}
    for name, busy in sim.pool_busy.items():
        utilization[name] = busy / (sim.size[name] * span)
    return Simulated(
        tuple(e2e),
        tuple(ttft),
        throughput_per_s=len(e2e) / span * 1e9,
        utilization=utilization,
    )
