"""What-if under load (``docs/whatif.md``): a run's own requests replayed through a
simulation of its load (:mod:`tracer.analysis.simulate`), once as measured and once
with a stage k times faster.

Each trace becomes a list of steps along its critical path
(:func:`~tracer.analysis.dependencies.critical_sections`), in time order:

- **Pools.** A wait for a slot of a finite pool is not kept as time: it becomes a
  request for a slot, held to the end of the span that waited, so queues fill and
  drain with the load. A wait is a ``X.queue`` sub-stage (an engine's
  ``gen_ai.latency.time_in_queue``), or the ``hoptrace.pool.wait_ns`` of a span that
  records its pool (then taken out of the span's first stretch of own time, after its
  first child, that can hold it). A pool's size is its spans' ``hoptrace.pool.size``,
  or ``--capacity``; a pool of unknown size keeps its waits as measured.
- **CPU.** The host's CPU demand per request D (from the bench's
  ``hoptrace.host.cpu_busy_ns`` over the run, or given) is spread over each request's
  stretches by their length, and served by a processor-shared CPU of C cores
  (``hoptrace.host.cpus``, or given): the more requests run at once, the slower each
  burst. What is left of a stretch, less its CPU at the run's own contention, is
  waiting time that the load does not change (a sleep, the network, a GPU).
- **Calibration.** The run's own contention is not known in advance: the share of
  each stretch that was CPU stretched by contention is found by bisection, so that
  the simulated run as measured has the measured mean end-to-end time.
- **Arrivals.** A bench run (``hoptrace.bench.concurrency``) is a closed loop of that
  many clients; any other run an open loop at its measured rate.

The projection is the measured percentile times the simulated ratio of after to
before at that percentile, so that what the model gets wrong about the run as it was
cancels out. It declines (None, with the reason) when the run is too small.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tracer import attributes as attrs
from tracer._errors import ConfigError
from tracer.analysis.aggregate import Stats, stats
from tracer.analysis.breakdown import client_first_token
from tracer.analysis.critical_path import trace_dependencies
from tracer.analysis.dependencies import critical_sections
from tracer.analysis.prepare import PreparedTrace, StageMap, prepare
from tracer.analysis.simulate import (
    ACQUIRE,
    BACKGROUND,
    CPU,
    DELAY,
    JOIN,
    MARK,
    RELEASE,
    Step,
    simulate,
)
from tracer.analysis.slo import Slo
from tracer.analysis.substages import covers
from tracer.analysis.traceset import TraceSet
from tracer.spans.model import Warnings

__all__ = [
    "MAX_REQUESTS",
    "MIN_REQUESTS",
    "LoadRun",
    "LoadWhatIf",
    "bench_levels",
    "load_run",
    "project_load",
]

#: Fewer measured requests than this: no load model.
MIN_REQUESTS = 20
#: More traces than this are more than one run: the load model asks for one.
MAX_REQUESTS = 20_000
_QUEUE = ".queue"
#: The ``hoptrace.run`` of a bench level's warm-up ends so.
WARMUP_SUFFIX = "-warmup"
_MS = 1e6


@dataclass(frozen=True)
class _Stretch:
    """One stretch of a request's critical path: its stage and length (ns)."""

    stage: str
    ns: float


@dataclass(frozen=True)
class _Template:
    """A request's critical path: stretches, pool steps and its first-token mark."""

    items: tuple[_Stretch | Step, ...]
    busy_ns: float  # the stretches' total (what the CPU demand is spread over)


@dataclass(frozen=True)
class LoadRun:
    """What a run's traces say about its load: its requests as templates, how they
    arrived, the pools and the CPU."""

    templates: tuple[_Template, ...]
    e2e_ms: tuple[float, ...]
    ttft_ms: tuple[float, ...]
    #: each request's time to first token, aligned with ``e2e_ms`` (None: no mark)
    ttft_each: tuple[float | None, ...]
    window_s: float
    answers_s: float
    clients: int | None
    arrival_per_s: float | None
    cores: float | None
    cpu_ns_per_request: float | None
    pools: dict[str, int]
    unsized: tuple[str, ...]
    in_flight: float

    @property
    def throughput_per_s(self) -> float:
        """Requests answered per second over the run: the answers after the first, over
        the time from the first to the last (the ramp of a run's start left out)."""
        return (len(self.e2e_ms) - 1) / self.answers_s if self.answers_s > 0 else 0.0

    @property
    def loaded(self) -> bool:
        """Whether the run carries load: requests overlapped in time, or waited."""
        waited = any(
            isinstance(x, Step) and x.kind == ACQUIRE for t in self.templates for x in t.items
        )
        return self.in_flight > 1.5 or waited


@dataclass(frozen=True)
class LoadWhatIf:
    """The load model's projection of one change (``docs/whatif.md``)."""

    before: Stats
    after: Stats
    ttft_before: Stats | None
    ttft_after: Stats | None
    simulated_before: Stats
    throughput_before_per_s: float
    throughput_after_per_s: float
    bottleneck: str
    utilization_after: dict[str, float]
    arrivals: str
    notes: tuple[str, ...] = field(default=())
    #: with an SLO: its limits (ms), the share of requests meeting it and the goodput
    #: (requests/s meeting it), before (measured) and after (projected)
    slo_limits_ms: tuple[tuple[str, float], ...] = ()
    attainment: tuple[float, float] | None = None
    goodput_per_s: tuple[float, float] | None = None


def bench_levels(traceset: TraceSet) -> dict[str, TraceSet]:
    """The bench levels among these traces (``hoptrace.run`` of the request spans that
    carry ``hoptrace.bench.concurrency``, warm-ups left out), each level's traces apart."""
    ids: dict[str, list[str]] = {}
    for trace_id, spans in traceset.traces.items():
        for s in spans:
            if s.parent_id is None and attrs.BENCH_CONCURRENCY in s.attributes:
                label = s.attributes.get(attrs.RUN)
                if isinstance(label, str) and not label.endswith(WARMUP_SUFFIX):
                    ids.setdefault(label, []).append(trace_id)
                break
    return {label: traceset.subset(found) for label, found in ids.items()}


def load_run(
    traceset: TraceSet,
    stage_map: StageMap | None = None,
    *,
    capacity: dict[str, float] | None = None,
    cores: float | None = None,
    cpu_ms_per_request: float | None = None,
) -> LoadRun:
    """The load of the traces of one run (see the module docstring).

    Raises:
        ConfigError: fewer than :data:`MIN_REQUESTS` usable traces.
    """
    capacity = dict(capacity or {})
    templates: list[_Template] = []
    e2e: list[float] = []
    ttft: list[float] = []
    ttft_each: list[float | None] = []
    starts: list[int] = []
    ends: list[int] = []
    busy: list[tuple[int, int]] = []
    concurrency: Counter[int] = Counter()
    host_cores: list[float] = []
    # Each process's cumulative CPU at its spans' ends, by instance.
    process: dict[str, list[tuple[int, int]]] = {}
    sizes: dict[str, int] = {}
    seen_pools: set[str] = set()
    for trace_id, spans in traceset.traces.items():
        trace = prepare(trace_id, spans, Warnings(), stage_map)
        if trace is None:
            continue
        root = trace.spans[trace.root]
        a = root.attributes
        level = a.get(attrs.BENCH_CONCURRENCY)
        if isinstance(level, int) and level > 0:
            concurrency[level] += 1
        if isinstance(a.get(attrs.HOST_CPU_BUSY), int):
            busy.append((trace.end[trace.root], a[attrs.HOST_CPU_BUSY]))
        if isinstance(a.get(attrs.HOST_CPUS), int | float) and a[attrs.HOST_CPUS] > 0:
            host_cores.append(float(a[attrs.HOST_CPUS]))
        for s in trace.spans:
            total = s.attributes.get(attrs.PROCESS_CPU_TOTAL_NS) if s.attributes else None
            if isinstance(total, int):
                instance = str(s.attributes.get(attrs.SERVICE_INSTANCE_ID, s.service))
                process.setdefault(instance, []).append((s.end_ns, total))
        template, first = _template(trace, sizes, seen_pools)
        templates.append(template)
        start, end = trace.start[trace.root], trace.end[trace.root]
        starts.append(start)
        ends.append(end)
        e2e.append((end - start) / _MS)
        ttft_each.append(None if first is None else first / _MS)
        if first is not None:
            ttft.append(first / _MS)
    if len(templates) < MIN_REQUESTS:
        raise ConfigError(
            f"the load model needs at least {MIN_REQUESTS} traces of one run, got "
            f"{len(templates)}; pick a run with --run (hoptrace bench --requests)"
        )
    for name, value in capacity.items():
        sizes[name] = max(int(round(value)), 1)
    window_s = (max(ends) - min(starts)) / 1e9
    clients = concurrency.most_common(1)[0][0] if concurrency else None
    answers_s = (max(ends) - min(ends)) / 1e9
    throughput = (len(e2e) - 1) / answers_s if answers_s > 0 else 0.0
    # The chain's own processes: each one's CPU over its spans' window, in cores.
    chain_cores = 0.0
    for points in process.values():
        if len(points) >= 2:
            points.sort()
            elapsed = points[-1][0] - points[0][0]
            if elapsed > 0:
                chain_cores += max(points[-1][1] - points[0][1], 0) / elapsed
    host_busy = 0.0
    if len(busy) >= 2:
        busy.sort()
        elapsed = busy[-1][0] - busy[0][0]
        if elapsed > 0:
            host_busy = max(busy[-1][1] - busy[0][1], 0) / elapsed
    cpu_ns = None if cpu_ms_per_request is None else cpu_ms_per_request * _MS
    if cpu_ns is None and throughput > 0 and (chain_cores or host_busy):
        cpu_ns = (chain_cores or host_busy) / throughput * 1e9
    if cores is None and host_cores:
        cores = min(host_cores)
        if chain_cores and host_busy > chain_cores:
            # What else kept the host busy (the collector, other programs) is taken
            # to keep it busy as much after the change: fewer cores for the chain.
            cores = max(cores - (host_busy - chain_cores), cores / 4)
    unsized = tuple(sorted(seen_pools - set(sizes)))
    return LoadRun(
        templates=tuple(_keep_unsized(t, unsized) for t in templates),
        e2e_ms=tuple(e2e),
        ttft_ms=tuple(ttft),
        ttft_each=tuple(ttft_each),
        window_s=window_s,
        answers_s=answers_s,
        clients=clients,
        arrival_per_s=None
        if clients
        else (len(e2e) - 1) / ((max(starts) - min(starts)) / 1e9 or 1e-9),
        cores=cores if cpu_ns is not None else None,
        cpu_ns_per_request=cpu_ns if cores is not None else None,
        pools={k: v for k, v in sizes.items() if k in seen_pools},
        unsized=unsized,
        in_flight=sum(e2e) / 1000 / window_s if window_s > 0 else 0.0,
    )


def _template(
    trace: PreparedTrace, sizes: dict[str, int], seen: set[str]
) -> tuple[_Template, float | None]:
    """The steps of one trace, and its time to first token (ns) or None."""
    deps = trace_dependencies(trace)
    sections = critical_sections(deps)
    root = trace.root
    t0 = trace.start[root]
    point = client_first_token(trace)
    if point is not None and not t0 < point:
        point = None
    if point is not None:
        point = min(point, deps.hi[root])
    # Where each pool's slot is taken: a queue sub-stage, or a span's recorded wait.
    takes: dict[int, tuple[str, int]] = {}  # span -> (pool, wait ns)
    for i, s in enumerate(trace.spans):
        name = s.attributes.get(attrs.POOL_NAME) if s.attributes else None
        if isinstance(name, str) and name:
            size = s.attributes.get(attrs.POOL_SIZE)
            if isinstance(size, int) and size > 0:
                sizes.setdefault(name, size)
            wait = s.attributes.get(attrs.POOL_WAIT_NS)
            takes[i] = (name, wait if isinstance(wait, int) and wait > 0 else 0)
    queue_owner: dict[int, str] = {}
    for i, stage in enumerate(trace.stage):
        if stage.endswith(_QUEUE):
            owner = trace.parent[i]
            pool = takes[owner][0] if owner in takes else stage[: -len(_QUEUE)]
            queue_owner[i] = pool
            takes.pop(owner, None)  # the queue sub-stage is where it waited
    items: list[_Stretch | Step] = []
    releases: list[tuple[int, str]] = []  # (time, pool)
    children_done: dict[int, bool] = {}
    marked = point is None
    for i, a, b in sections:
        for at, pool in sorted(releases):
            if at <= a:
                items.append(Step(RELEASE, pool=pool))
        releases = [(at, pool) for at, pool in releases if at > a]
        if i in queue_owner:
            pool = queue_owner[i]
            seen.add(pool)
            items.append(Step(ACQUIRE, ns=float(b - a), pool=pool))
            releases.append((deps.hi[trace.parent[i]], pool))
            continue
        stage = trace.stage[i]
        if i in takes and (children_done.get(i) or not deps.kids[i]) and b - a >= takes[i][1]:
            pool, wait = takes.pop(i)
            seen.add(pool)
            items.append(Step(ACQUIRE, ns=float(wait), pool=pool))
            releases.append((deps.hi[i], pool))
            a += wait
        if not marked and point is not None and a < point <= b:
            if point > a:
                items.append(_Stretch(stage, float(point - a)))
            items.append(Step(MARK))
            marked = True
            a = point
        if b > a:
            items.append(_Stretch(stage, float(b - a)))
        p = trace.parent[i]
        if p >= 0:
            children_done[p] = True
    for _, pool in sorted(releases):
        items.append(Step(RELEASE, pool=pool))
    if not marked:
        items.append(Step(MARK))
    busy = sum(x.ns for x in items if isinstance(x, _Stretch))
    return _Template(tuple(items), busy), None if point is None else float(point - t0)


def _keep_unsized(template: _Template, unsized: Sequence[str]) -> _Template:
    """A pool of unknown size keeps its waits as measured (as time, not a queue)."""
    if not unsized:
        return template
    items: list[_Stretch | Step] = []
    for x in template.items:
        if isinstance(x, Step) and x.pool in unsized:
            if x.kind == ACQUIRE and x.ns > 0:
                items.append(_Stretch(x.pool + _QUEUE, x.ns))
            continue
        items.append(x)
    return _Template(tuple(items), template.busy_ns)


#: How a request's CPU is laid out: ``serial`` on its path; ``beside`` its waits (as a
#: stream's relays run beside the model's next token), joined before its first token
#: and its end.
CPU_LAYOUT = "serial"


#: CPU per request falls as throughput rises (event loops handle more ready events a
#: wake-up, fixed-rate work is spread over more requests): x (throughput ratio) ** -this.
CPU_SCALING = 0.2


def _steps(
    run: LoadRun,
    stage: str | None,
    speedup: float,
    stretch: float,
    cpu_ns: float | None = None,
) -> list[list[Step]]:
    """Simulation steps of every template: CPU at ``stretch`` taken out of each stretch,
    ``stage`` (with its sub-stages) ``speedup`` times faster; ``cpu_ns`` per request
    (default: the run's)."""
    cpu = run.cpu_ns_per_request if cpu_ns is None else cpu_ns
    beside = CPU_LAYOUT == "beside"
    out = []
    for t in run.templates:
        steps: list[Step] = []
        for x in t.items:
            if isinstance(x, Step):
                if x.kind == MARK and beside:
                    steps.append(Step(JOIN))
                steps.append(Step(x.kind, pool=x.pool) if x.kind == ACQUIRE else x)
                continue
            share = cpu * x.ns / t.busy_ns if cpu and t.busy_ns > 0 else 0.0
            # The run's own contention: ``stretch`` times the CPU was waiting time too
            # (serial), or what of it the waits did not hide (beside: ``stretch`` - 1).
            wait = max(x.ns - share * (stretch if not beside else stretch - 1.0), 0.0)
            if stage is not None and covers(stage, x.stage):
                wait /= speedup
            if share > 0 and beside:
                steps.append(Step(BACKGROUND, share))
            if wait > 0:
                steps.append(Step(DELAY, wait))
            if share > 0 and not beside:
                steps.append(Step(CPU, share))
        if beside:
            steps.append(Step(JOIN))
        out.append(steps)
    return out


def _run(run: LoadRun, steps: list[list[Step]], requests: int, seed: int):  # noqa: ANN202
    warmup = max(2 * (run.clients or 1), 50)
    return simulate(
        steps,
        cores=run.cores or 1.0,
        pools=run.pools,
        clients=run.clients,
        arrival_per_s=None if run.clients else run.arrival_per_s,
        requests=requests,
        warmup=warmup,
        seed=seed,
    )


def project_load(
    run: LoadRun,
    stage: str,
    speedup: float,
    *,
    slo: Slo | None = None,
    requests: int = 3000,
    seed: int = 1,
) -> LoadWhatIf:
    """``stage`` ``speedup`` times faster, projected through the run's load; with
    ``slo`` (``ttft`` and ``e2e`` limits), its attainment and goodput before and after."""
    notes: list[str] = []
    if run.cores is None:
        notes.append(
            "no CPU measure in the traces (hoptrace bench records it): CPU contention "
            "is not modelled"
        )
    for pool in run.unsized:
        notes.append(
            f"pool {pool!r} has no size in the traces: its waits are kept as measured "
            f"(give --capacity {pool}=N)"
        )
    measured = float(np.mean(run.e2e_ms))
    lo, hi = 1.0, 1.0
    stretch = 1.0
    if run.cpu_ns_per_request and run.cores:
        # The run's own CPU stretch: the simulated run as measured matches its mean.
        hi = 64.0
        for _ in range(14):
            mid = (lo + hi) / 2
            got = np.mean(_run(run, _steps(run, None, 1.0, mid), requests // 2, seed).e2e_ns) / _MS
            if got > measured:
                lo = mid
            else:
                hi = mid
        stretch = (lo + hi) / 2
    base = _run(run, _steps(run, None, 1.0, stretch), requests, seed)
    after = _run(run, _steps(run, stage, speedup, stretch), requests, seed)
    if run.cpu_ns_per_request and run.cores and CPU_SCALING:
        # The CPU per request at the throughput the change reaches (a fixed point).
        for _ in range(4):
            ratio = after.throughput_per_s / base.throughput_per_s if base.throughput_per_s else 1.0
            cpu = run.cpu_ns_per_request * ratio**-CPU_SCALING
            after = _run(run, _steps(run, stage, speedup, stretch, cpu), requests, seed)
    base_ms = np.array(base.e2e_ns) / _MS
    after_ms = np.array(after.e2e_ns) / _MS
    before = stats(run.e2e_ms)
    sim_before = stats(base_ms)
    sim_after = stats(after_ms)
    projected = _scaled(before, sim_before, sim_after)
    ttft_before = ttft_after = None
    if run.ttft_ms:
        ttft_before = stats(run.ttft_ms)
        b = [x / _MS for x in base.ttft_ns if x is not None]
        a = [x / _MS for x in after.ttft_ns if x is not None]
        if b and a:
            ttft_after = _scaled(ttft_before, stats(b), stats(a))
    util = dict(after.utilization)
    if run.cores is None:
        util.pop("cpu", None)
    bottleneck = max(util, key=lambda k: util[k]) if util else "none"
    arrivals = (
        f"a closed loop of {run.clients} clients"
        if run.clients
        else f"an open loop of {run.arrival_per_s:.1f} requests/s"
    )
    limits: tuple[tuple[str, float], ...] = ()
    attainment = goodput = None
    if slo is not None:
        limits = slo.limits_ms
        met_before = _meeting(slo, run.e2e_ms, run.ttft_each, 1.0, 1.0)
        # The simulated requests after, on the measured scale (as the percentiles).
        e2e_scale = before.mean / sim_before.mean if sim_before.mean > 0 else 1.0
        b_ttft = [x for x in base.ttft_ns if x is not None]
        ttft_scale = (
            ttft_before.mean / (float(np.mean(b_ttft)) / _MS)
            if ttft_before is not None and b_ttft and np.mean(b_ttft) > 0
            else 1.0
        )
        met_after = _meeting(
            slo,
            [x / _MS for x in after.e2e_ns],
            [None if x is None else x / _MS for x in after.ttft_ns],
            e2e_scale,
            ttft_scale,
        )
        attainment = (met_before, met_after)
    x_after = (
        run.throughput_per_s * after.throughput_per_s / base.throughput_per_s
        if base.throughput_per_s > 0
        else after.throughput_per_s
    )
    if attainment is not None:
        goodput = (attainment[0] * run.throughput_per_s, attainment[1] * x_after)
    return LoadWhatIf(
        slo_limits_ms=limits,
        attainment=attainment,
        goodput_per_s=goodput,
        before=before,
        after=projected,
        ttft_before=ttft_before,
        ttft_after=ttft_after,
        simulated_before=sim_before,
        throughput_before_per_s=run.throughput_per_s,
        throughput_after_per_s=x_after,
        bottleneck=bottleneck,
        utilization_after=util,
        arrivals=arrivals,
        notes=tuple(notes),
    )


def _meeting(
    slo: Slo,
    e2e_ms: Sequence[float],
    ttft_ms: Sequence[float | None],
    e2e_scale: float,
    ttft_scale: float,
) -> float:
    """The share of requests meeting every limit of ``slo`` (a request without a first
    token misses a ``ttft`` limit)."""
    e2e_limit, ttft_limit = slo.limit_ms("e2e"), slo.limit_ms("ttft")
    met = 0
    for e2e, ttft in zip(e2e_ms, ttft_ms, strict=True):
        if e2e_limit is not None and e2e * e2e_scale > e2e_limit:
            continue
        if ttft_limit is not None and (ttft is None or ttft * ttft_scale > ttft_limit):
            continue
        met += 1
    return met / len(e2e_ms) if e2e_ms else 0.0


def _scaled(measured: Stats, sim_before: Stats, sim_after: Stats) -> Stats:
    """The measured figures times the simulated after/before ratio at each."""

    def ratio(key: str) -> float:
        b = getattr(sim_before, key)
        return getattr(sim_after, key) / b if b > 0 else 1.0

    return Stats(
        n=measured.n,
        mean=measured.mean * ratio("mean"),
        p50=measured.p50 * ratio("p50"),
        p90=measured.p90 * ratio("p90"),
        p99=measured.p99 * ratio("p99"),
        min=measured.min * ratio("min"),
        max=measured.max * ratio("max"),
    )
