"""What a run's traces say about its load (``docs/whatif.md``): its requests as lists
of steps along their critical paths, how they arrived, the pools and the CPU.

Each trace becomes a list of steps along its critical path
(:func:`~tracer.analysis.dependencies.critical_sections`), in time order:

- **Pools.** A wait for a slot of a finite pool is not kept as time: it becomes a
  request for a slot, held to the end of the span that waited, so queues fill and
  drain with the load. A wait is a ``X.queue`` sub-stage (an engine's
  ``gen_ai.latency.time_in_queue``), or the ``hoptrace.pool.wait_ns`` of a span that
  records its pool (then taken out of the span's first stretch of own time, after its
  first child, that can hold it). A pool's size is its spans' ``hoptrace.pool.size``,
  or ``--capacity``; a pool of unknown size keeps its waits as measured.
- **CPU.** The chain's CPU per request: each process's cumulative CPU
  (``hoptrace.process.cpu_total_ns`` by ``service.instance.id``, the bench client's
  included) over the run, over the requests answered; the cores the chain shares: the
  bench's ``hoptrace.host.cpus``, less what else kept the host busy
  (``hoptrace.host.cpu_busy_ns``). Both can be given instead.
- **Arrivals.** A bench run (``hoptrace.bench.concurrency``) is a closed loop of that
  many clients; any other run an open loop at its measured rate.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from tracer import attributes as attrs
from tracer._errors import ConfigError
from tracer.analysis.breakdown import client_first_token
from tracer.analysis.critical_path import trace_dependencies
from tracer.analysis.dependencies import critical_sections
from tracer.analysis.prepare import PreparedTrace, StageMap, prepare
from tracer.analysis.simulate import ACQUIRE, MARK, RELEASE, Step
from tracer.analysis.traceset import TraceSet
from tracer.spans.model import Warnings

__all__ = [
    "MAX_REQUESTS",
    "MIN_REQUESTS",
    "WARMUP_SUFFIX",
    "LoadRun",
    "Stretch",
    "Template",
    "bench_levels",
    "load_run",
]

MIN_REQUESTS = 20
#: More traces than this are more than one run: the load model asks for one.
MAX_REQUESTS = 20_000
_QUEUE = ".queue"
#: The ``hoptrace.run`` of a bench level's warm-up ends so.
WARMUP_SUFFIX = "-warmup"
_MS = 1e6


@dataclass(frozen=True)
class Stretch:
    """One stretch of a request's critical path: its stage and length (ns)."""

    stage: str
    ns: float


@dataclass(frozen=True)
class Template:
    """A request's critical path: stretches, pool steps and its first-token mark."""

    items: tuple[Stretch | Step, ...]
    busy_ns: float  # the stretches' total (what the CPU demand is spread over)


@dataclass(frozen=True)
class LoadRun:
    """What a run's traces say about its load: its requests as templates, how they
    arrived, the pools and the CPU."""

    templates: tuple[Template, ...]
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
    templates: list[Template] = []
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
) -> tuple[Template, float | None]:
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
    items: list[Stretch | Step] = []
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
                items.append(Stretch(stage, float(point - a)))
            items.append(Step(MARK))
            marked = True
            a = point
        if b > a:
            items.append(Stretch(stage, float(b - a)))
        p = trace.parent[i]
        if p >= 0:
            children_done[p] = True
    for _, pool in sorted(releases):
        items.append(Step(RELEASE, pool=pool))
    if not marked:
        items.append(Step(MARK))
    busy = sum(x.ns for x in items if isinstance(x, Stretch))
    return Template(tuple(items), busy), None if point is None else float(point - t0)


def _keep_unsized(template: Template, unsized: Sequence[str]) -> Template:
    """A pool of unknown size keeps its waits as measured (as time, not a queue)."""
    if not unsized:
        return template
    items: list[Stretch | Step] = []
    for x in template.items:
        if isinstance(x, Step) and x.pool in unsized:
            if x.kind == ACQUIRE and x.ns > 0:
                items.append(Stretch(x.pool + _QUEUE, x.ns))
            continue
        items.append(x)
    return Template(tuple(items), template.busy_ns)
