"""A discrete-event simulation of requests through a chain under load
(``docs/whatif.md``).

What it models: clients that each send their next request when the last one is
answered (a closed loop of N clients, as ``hoptrace bench`` runs them), requests
arriving at a rate (an open loop, Poisson), or requests arriving at given times (an
open loop replayed: a run's own arrivals); one host CPU of C cores shared by every
process of the chain, served by processor sharing (n busy bursts each get
min(1, C/n) of a core; a process of few threads, an event loop, never more than its
cores, what it cannot use going to the others), except that a process's event loop
takes its own bursts one at a time per core, first come first served, as asyncio runs
its callbacks; and pools served first come, first served (a gateway's workers, an
engine's slots). Each request follows its own steps:
wait a fixed time, use the CPU for some time, take a slot of a pool, give it back, or
mark its first token. A request's steps are a list, or a :class:`Graph` of lists that run in
parallel where the request's dependencies let them (a fan-out and its join).

Our own and small rather than SimPy: processor sharing needs the completion of every
running burst recomputed whenever one starts or ends, which a generic process
framework does with interrupts; here it is one loop over a heap, and one service count
per process brings all of its bursts up to date.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "ACQUIRE",
    "CPU",
    "DELAY",
    "MARK",
    "RELEASE",
    "Graph",
    "Simulated",
    "Step",
    "simulate",
]

DELAY, CPU, ACQUIRE, RELEASE, MARK = "delay", "cpu", "acquire", "release", "mark"


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a request: ``DELAY`` or ``CPU`` for ``ns`` nanoseconds (CPU time at
    a full core; a CPU step's ``pool``, when given, is the process it runs in),
    ``ACQUIRE``/``RELEASE`` a slot of ``pool``, or ``MARK`` its first token."""

    kind: str
    ns: float = 0.0
    pool: str = ""
    #: a CPU step of a named process's event loop: its bursts run one at a time per
    #: core of the process, in the order they came (the rest of the process's CPU is
    #: shared with them)
    loop: bool = False


@dataclass(frozen=True, slots=True)
class Graph:
    """A request whose steps run in parallel where its dependencies let them: node
    ``i`` runs ``nodes[i]`` once every node of ``after[i]`` has finished (node 0
    waits for none: the request's start); the request ends when every node has."""

    nodes: tuple[tuple[Step, ...], ...]
    after: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        if not self.nodes or len(self.nodes) != len(self.after):
            raise ValueError("a graph needs one 'after' per node, and at least one node")
        for i, before in enumerate(self.after):
            if any(not 0 <= j < i for j in before) or (i > 0 and not before):
                raise ValueError(f"node {i} must wait for earlier nodes, and only node 0 for none")


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


class _Plan:
    """A template made ready to run: its nodes, who follows each, and how many each
    waits for."""

    __slots__ = ("nodes", "follow", "waits")

    def __init__(self, template: Sequence[Step] | Graph) -> None:
        graph = template if isinstance(template, Graph) else Graph((tuple(template),), ((),))
        self.nodes = graph.nodes
        follow: list[list[int]] = [[] for _ in graph.nodes]
        for i, before in enumerate(graph.after):
            for j in before:
                follow[j].append(i)
        self.follow = tuple(tuple(f) for f in follow)
        self.waits = tuple(len(before) for before in graph.after)


class _Request:
    __slots__ = ("plan", "waits", "left", "started", "first", "client")

    def __init__(self, plan: _Plan, started: float, client: int) -> None:
        self.plan = plan
        self.waits = list(plan.waits)
        self.left = len(plan.nodes)
        self.started = started
        self.first: float | None = None
        self.client = client


class _Thread:
    """One node of a request on its way through its steps."""

    __slots__ = ("request", "steps", "node", "at")

    def __init__(self, request: _Request, node: int) -> None:
        self.request = request
        self.node = node
        self.steps = request.plan.nodes[node]
        self.at = 0


class _Sim:
    """The event loop: a heap of (time, order, thread), the CPU's running bursts and
    the pools' holders and queues."""

    def __init__(
        self,
        cores: float,
        pools: dict[str, int],
        others: float = 0.0,
        loops: dict[str, float] | None = None,
    ) -> None:
        if not cores > 0:
            raise ValueError(f"cores must be positive, got {cores!r}")
        for name, most in (loops or {}).items():
            if not most >= 1:
                raise ValueError(f"process {name!r} must run on a core at least, got {most!r}")
        for name, size in pools.items():
            if size < 1:
                raise ValueError(f"pool {name!r} must have at least one slot, got {size!r}")
        self.now = 0.0
        self.cores = float(cores)
        self.others = float(others)
        self.heap: list[tuple[float, int, int, _Thread | None]] = []
        self.order = 0
        # The CPU's running bursts by process ("": none named, or one of no limit),
        # each a heap of (the process's service count at which the burst is done,
        # order, burst): all bursts of a process run at one rate, so one count per
        # process (``served``) brings them all up to date. Processes of few threads
        # (``loops``) are capped at their cores.
        self.loops = dict(loops or {})
        # Each process's loop bursts running (at most its cores) and waiting their turn.
        self.in_loop: dict[str, int] = {}
        self.waiting: dict[str, deque[tuple[float, _Thread]]] = {}
        self.groups: dict[str, list[tuple[float, int, _Thread, bool]]] = {}
        self.served: dict[str, float] = {}
        self.bursts = 0
        self.level = 1.0
        self.tight: dict[str, float] = {}
        self.updated = 0.0
        self.version = 0
        self.cpu_busy = 0.0  # core-ns used
        self.size = dict(pools)
        self.held = {name: 0 for name in pools}
        self.queue: dict[str, deque[_Thread]] = {name: deque() for name in pools}
        self.pool_busy = {name: 0.0 for name in pools}
        self.pool_updated = {name: 0.0 for name in pools}

    def at(self, time: float, thread: _Thread | None, version: int = -1) -> None:
        self.order += 1
        heapq.heappush(self.heap, (time, self.order, version, thread))

    # -- the CPU, processor sharing -------------------------------------------------
    def _share_out(self) -> None:
        """The rate per burst: the cores shared equally among the bursts (and the
        others' threads), no process given more than its threads can use
        (water-filling: what a capped process cannot use goes to the rest). Sets
        ``level`` (every burst's rate) and ``tight`` (the capped processes' rates)."""
        loops, weight = self.loops, self.others + self.bursts
        level = min(1.0, self.cores / weight) if weight > 0 else 1.0
        tight = []
        for name, g in self.groups.items():
            n = len(g)
            if n > 1 and name and loops[name] < level * n:
                tight.append((loops[name] / n, n, name))
        rates: dict[str, float] = {}
        if tight:
            tight.sort()
            left = self.cores
            for limit, n, name in tight:
                if limit >= level:
                    break
                rates[name] = limit  # runs at its limit; the rest share what is left
                left -= limit * n
                weight -= n
                level = min(1.0, left / weight) if weight > 0 else 1.0
        self.level, self.tight = level, rates

    def _catch_up(self) -> None:
        dt = self.now - self.updated
        tight, level, served = self.tight, self.level, self.served
        for name, group in self.groups.items():
            done = dt * (tight[name] if name in tight else level)
            served[name] += done
            self.cpu_busy += done * len(group)
        self.updated = self.now

    def _reschedule(self) -> None:
        self.version += 1
        if not self.groups:
            return
        self._share_out()
        tight, level, served = self.tight, self.level, self.served
        soonest = float("inf")
        for name, g in self.groups.items():
            wait = (g[0][0] - served[name]) / (tight[name] if name in tight else level)
            if wait < soonest:
                soonest = wait
        self.at(self.now + max(soonest, 0.0), None, self.version)

    def cpu(self, thread: _Thread, ns: float, process: str = "", loop: bool = False) -> None:
        self._catch_up()
        name = process if process in self.loops else ""
        loop = loop and bool(name)
        if loop:
            if self.in_loop.get(name, 0) >= max(int(self.loops[name]), 1):
                self.waiting.setdefault(name, deque()).append((ns, thread))
                return
            self.in_loop[name] = self.in_loop.get(name, 0) + 1
        if name not in self.groups:
            self.groups[name] = []
            self.served[name] = 0.0
        self._start(name, ns, thread, loop)
        self._reschedule()

    def _start(self, name: str, ns: float, thread: _Thread, loop: bool) -> None:
        """A burst of ``ns`` starts running in process ``name``'s group."""
        self.order += 1
        heapq.heappush(self.groups[name], (self.served[name] + ns, self.order, thread, loop))
        self.bursts += 1

    def cpu_tick(self) -> list[_Thread]:
        self._catch_up()
        # Done within a nanosecond: floats of a clock in ns cannot step finer.
        done = []
        for name in list(self.groups):
            group, served = self.groups[name], self.served[name]
            while group and group[0][0] - served <= 1.0:
                _, _, thread, loop = heapq.heappop(group)
                done.append(thread)
                self.bursts -= 1
                if loop:  # the loop's next burst in line starts
                    queued = self.waiting.get(name)
                    if queued:
                        self._start(name, *queued.popleft(), True)
                    else:
                        self.in_loop[name] -= 1
            if not group:
                del self.groups[name]
        self._reschedule()
        return done

    # -- pools, first come first served --------------------------------------------
    def _pool_catch_up(self, name: str) -> None:
        self.pool_busy[name] += (self.now - self.pool_updated[name]) * self.held[name]
        self.pool_updated[name] = self.now

    def acquire(self, name: str, thread: _Thread) -> bool:
        if name not in self.size:
            return True  # a pool of unknown size: no limit
        self._pool_catch_up(name)
        if self.held[name] < self.size[name]:
            self.held[name] += 1
            return True
        self.queue[name].append(thread)
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

    def restart_window(self) -> None:
        """Busy time counted anew: the measured window starts now."""
        self._catch_up()
        self.cpu_busy = 0.0
        for name in self.pool_busy:
            self._pool_catch_up(name)
            self.pool_busy[name] = 0.0


def simulate(
    templates: Sequence[Sequence[Step] | Graph],
    *,
    cores: float,
    pools: dict[str, int] | None = None,
    clients: int | None = None,
    arrival_per_s: float | None = None,
    schedule: Sequence[tuple[float, int]] | None = None,
    others: float = 0.0,
    loops: dict[str, float] | None = None,
    requests: int = 2000,
    warmup: int = 200,
    seed: int = 1,
) -> Simulated:
    """Run ``requests`` requests after ``warmup`` (not measured), through a closed loop
    of ``clients``, an open loop of ``arrival_per_s`` requests a second (each following
    a template picked at random), or ``schedule``: (arrival time in ns, template index)
    of every request in time order, replayed as given (``requests`` + ``warmup`` is
    then its length). Exactly one of the three. ``others``: busy threads of other
    programs that share the cores with the requests' bursts all along. ``loops``: the
    most cores each named process can use at once (a Python process with one event
    loop: 1); a ``CPU`` step whose ``pool`` names one runs in it, and a ``loop`` step
    there waits its turn at that process's loop.

    Raises:
        ValueError: no templates, not exactly one of ``clients``, ``arrival_per_s``
            and ``schedule``, a schedule of the wrong length, a bad graph or a
            non-positive size.
    """
    if not templates:
        raise ValueError("simulate needs at least one request template")
    if sum(x is not None for x in (clients, arrival_per_s, schedule)) != 1:
        raise ValueError("give exactly one of clients (closed loop), arrival_per_s and schedule")
    if clients is not None and clients < 1:
        raise ValueError(f"clients must be at least 1, got {clients!r}")
    if arrival_per_s is not None and not arrival_per_s > 0:
        raise ValueError(f"arrival_per_s must be positive, got {arrival_per_s!r}")
    total = requests + warmup
    if schedule is not None and len(schedule) != total:
        raise ValueError(f"the schedule holds {len(schedule)} arrivals, not {total}")
    plans = [_Plan(t) for t in templates]
    rng = random.Random(seed)
    sim = _Sim(cores, pools or {}, others, loops)
    sent = 0
    e2e: list[float] = []
    ttft: list[float | None] = []
    window_start = 0.0

    def send(client: int, which: int | None = None) -> None:
        nonlocal sent
        sent += 1
        plan = plans[rng.randrange(len(plans)) if which is None else which]
        sim.at(sim.now, _Thread(_Request(plan, sim.now, client), 0))

    gap = 0.0
    if clients is not None:
        for c in range(min(clients, total)):
            send(c)
    elif schedule is not None:
        for time, _ in schedule[:1]:
            sim.at(time, None, -2)
    else:
        gap = 1e9 / arrival_per_s  # type: ignore[operator]
        send(-1)
        sim.at(sim.now + rng.expovariate(1.0) * gap, None, -2)
    finished = 0
    while sim.heap and finished < total:
        time, _, version, thread = heapq.heappop(sim.heap)
        sim.now = time
        if thread is None:
            if version == -2:  # the next open-loop arrival
                if schedule is not None:
                    send(-1, schedule[sent][1])
                    if sent < total:
                        sim.at(schedule[sent][0], None, -2)
                elif sent < total:
                    send(-1)
                    sim.at(sim.now + rng.expovariate(1.0) * gap, None, -2)
                continue
            if version != sim.version:
                continue  # a CPU completion computed before the bursts changed
            ready = sim.cpu_tick()
        else:
            ready = [thread]
        while ready:
            r = ready.pop()
            steps = r.steps
            while r.at < len(steps):
                step = steps[r.at]
                r.at += 1
                if step.kind == DELAY:
                    if step.ns > 0:
                        sim.at(sim.now + step.ns, r)
                        break
                elif step.kind == CPU:
                    if step.ns > 0:
                        sim.cpu(r, step.ns, step.pool, step.loop)
                        break
                elif step.kind == ACQUIRE:
                    if not sim.acquire(step.pool, r):
                        break  # woken when a slot passes to it
                elif step.kind == RELEASE:
                    sim.release(step.pool)
                elif step.kind == MARK:
                    if r.request.first is None:
                        r.request.first = sim.now
            else:
                request = r.request
                request.left -= 1
                for nxt in request.plan.follow[r.node]:
                    request.waits[nxt] -= 1
                    if request.waits[nxt] == 0:
                        ready.append(_Thread(request, nxt))
                if request.left:
                    continue
                finished += 1
                if finished > warmup:
                    e2e.append(sim.now - request.started)
                    ttft.append(None if request.first is None else request.first - request.started)
                elif finished == warmup:  # the measured window starts: busy time anew
                    window_start = sim.now
                    sim.restart_window()
                if request.client >= 0 and sent < total:
                    send(request.client)
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
