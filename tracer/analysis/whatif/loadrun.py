"""What a run's traces say about its load (``docs/whatif.md``): its requests as graphs
of their dependencies, how they arrived, the pools and the CPU.

Each trace becomes a graph of stretches of own time and pool steps
(:mod:`tracer.analysis.whatif.loadgraph`): parallel branches stay parallel, and a wait for a
slot of a finite pool becomes a request for a slot, so queues fill and drain with the
load. A pool's size is its spans' ``hoptrace.pool.size``, or ``--capacity``; a pool
of unknown size keeps its waits as measured.
- **CPU.** The chain's CPU per request: each process's cumulative CPU
  (``hoptrace.process.cpu_total_ns`` by ``service.instance.id``, the bench client's
  included) over the run, over the requests answered; the cores the chain shares: the
  bench's ``hoptrace.host.cpus``, less what else kept the host busy
  (``hoptrace.host.cpu_busy_ns``). Both can be given instead.
- **Arrivals.** A closed-loop bench run (``hoptrace.bench.concurrency``) is a closed
  loop of that many clients; any other run (an open-loop bench, ``hoptrace bench
  --rate``; traffic from clients hoptrace did not instrument, whose traces start at
  the gateway's server span) is an open loop, whose arrivals are the run's own start
  times.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from tracer import attributes as attrs
from tracer._errors import ConfigError
from tracer.analysis.model.prepare import StageMap, prepare
from tracer.analysis.model.traceset import TraceSet
from tracer.analysis.whatif.loadgraph import Stretch, Template, keep_unsized, template
from tracer.spans.model import Warnings

__all__ = [
    "CALLER_SHARE",
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
#: The ``hoptrace.run`` of a bench level's warm-up ends so.
WARMUP_SUFFIX = "-warmup"
_MS = 1e6
#: What a call of a stage costs its caller in CPU, as a share of what it costs the
#: stage's own processes: as much (``docs/whatif.md``, measured on the demo's chain).
CALLER_SHARE = 1.0


@dataclass(frozen=True)
class LoadRun:
    """What a run's traces say about its load: its requests as templates, how they
    arrived, the pools and the CPU."""

    templates: tuple[Template, ...]
    e2e_ms: tuple[float, ...]
    ttft_ms: tuple[float, ...]
    #: each request's time to first token, aligned with ``e2e_ms`` (None: no mark)
    ttft_each: tuple[float | None, ...]
    #: each request's start, seconds after the run's first (aligned with ``templates``)
    starts_s: tuple[float, ...]
    window_s: float
    answers_s: float
    clients: int | None
    cores: float | None
    #: the cores the rest of the host kept busy (its other programs), as busy threads
    #: sharing the cores with the chain's bursts
    cpu_ns_per_request: float | None
    pools: dict[str, int]
    unsized: tuple[str, ...]
    in_flight: float
    other_cores: float = 0.0
    #: what one more call of a stage costs in CPU, as a share of the chain's per
    #: request: its own processes' share (those all of whose spans are in that stage or
    #: its sub-stages, a model server's for ``inference``), and as much again for the
    #: caller reading the answer when another process calls it (:data:`CALLER_SHARE`)
    stage_cpu: tuple[tuple[str, float], ...] = ()
    #: each of the chain's services: its share of the chain's CPU and its processes
    #: (each one event loop: one core at most)
    processes: tuple[tuple[str, float, int], ...] = ()

    @property
    def throughput_per_s(self) -> float:
        """Requests answered per second over the run's measured window (from the first
        request's start to the last one's end), as ``hoptrace runs`` has it."""
        return len(self.e2e_ms) / self.window_s if self.window_s > 0 else 0.0

    @property
    def arrival_span_s(self) -> float:
        """Seconds from the first request's start to the last one's."""
        return max(self.starts_s) - min(self.starts_s) if self.starts_s else 0.0

    @property
    def arrival_per_s(self) -> float:
        """Requests sent per second while they were being sent (an open loop's rate)."""
        span = self.arrival_span_s
        return (len(self.starts_s) - 1) / span if span > 0 else float("inf")

    @property
    def loaded(self) -> bool:
        """Whether the run carries load: requests overlapped in time, or waited."""
        return self.in_flight > 1.5 or any(t.waited for t in self.templates)


def bench_levels(traceset: TraceSet) -> dict[str, TraceSet]:
    """The bench levels among these traces (``hoptrace.run`` of the request spans that
    carry ``hoptrace.bench.concurrency`` or, an open loop's, ``hoptrace.bench.rate``;
    warm-ups left out), each level's traces apart."""
    ids: dict[str, list[str]] = {}
    for trace_id, spans in traceset.traces.items():
        for s in spans:
            if s.parent_id is None and (
                attrs.BENCH_CONCURRENCY in s.attributes or attrs.BENCH_RATE in s.attributes
            ):
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
    # Each service's processes, and the top stages its spans are in.
    instance_of: dict[str, set[str]] = {}
    stages_of: dict[str, set[str]] = {}
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
        for i, s in enumerate(trace.spans):
            stages_of.setdefault(s.service, set()).add(trace.stage[i].split(".")[0])
            if not s.attributes:
                continue
            cpus = s.attributes.get(attrs.HOST_CPUS)
            if isinstance(cpus, int | float) and not isinstance(cpus, bool) and cpus > 0:
                host_cores.append(float(cpus))
            total = s.attributes.get(attrs.PROCESS_CPU_TOTAL_NS)
            if isinstance(total, int):
                instance = str(s.attributes.get(attrs.SERVICE_INSTANCE_ID, s.service))
                process.setdefault(instance, []).append((s.end_ns, total))
                instance_of.setdefault(s.service, set()).add(instance)
        graph, first = template(trace, sizes, seen_pools)
        templates.append(graph)
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
    # The CPU is measured between spans' ends: over the answers' rate in that time.
    answer_rate = (len(e2e) - 1) / answers_s if answers_s > 0 else 0.0
    # The chain's own processes: each one's CPU over its spans' window, in cores.
    chain_cores = 0.0
    cores_of: dict[str, float] = {}
    for instance, points in process.items():
        if len(points) >= 2:
            points.sort()
            elapsed = points[-1][0] - points[0][0]
            if elapsed > 0:
                cores_of[instance] = max(points[-1][1] - points[0][1], 0) / elapsed
                chain_cores += cores_of[instance]
    processes = tuple(
        (service, sum(cores_of.get(i, 0.0) for i in instances) / chain_cores, len(instances))
        for service, instances in sorted(instance_of.items())
        if chain_cores > 0
    )
    stage_cpu: dict[str, float] = {}
    for service, instances in instance_of.items():
        top = stages_of.get(service, set())
        if len(top) == 1 and chain_cores > 0:
            (name,) = top
            used = sum(cores_of.get(i, 0.0) for i in instances)
            stage_cpu[name] = stage_cpu.get(name, 0.0) + used / chain_cores
    for name in stage_cpu:
        # The caller's side of a call (the app reading the model's answer as it streams
        # in) costs as much again: what one process writes, another reads.
        if any(name in top and len(top) > 1 for top in stages_of.values()):
            stage_cpu[name] *= 1 + CALLER_SHARE
    host_busy = 0.0
    if len(busy) >= 2:
        busy.sort()
        elapsed = busy[-1][0] - busy[0][0]
        if elapsed > 0:
            host_busy = max(busy[-1][1] - busy[0][1], 0) / elapsed
    cpu_ns = None if cpu_ms_per_request is None else cpu_ms_per_request * _MS
    if cpu_ns is None and answer_rate > 0 and (chain_cores or host_busy):
        cpu_ns = (chain_cores or host_busy) / answer_rate * 1e9
    others = 0.0
    if cores is None and host_cores:
        cores = min(host_cores)
        if chain_cores and host_busy > chain_cores:
            # What else kept the host busy (the collector, other programs) is taken
            # to keep it busy as much after the change: as many busy threads of theirs
            # sharing the cores with the chain's.
            others = min(host_busy - chain_cores, cores)
    unsized = tuple(sorted(seen_pools - set(sizes)))
    return LoadRun(
        templates=tuple(keep_unsized(t, unsized) for t in templates),
        e2e_ms=tuple(e2e),
        ttft_ms=tuple(ttft),
        ttft_each=tuple(ttft_each),
        starts_s=tuple((x - min(starts)) / 1e9 for x in starts),
        window_s=window_s,
        answers_s=answers_s,
        clients=clients,
        cores=cores if cpu_ns is not None else None,
        other_cores=others if cpu_ns is not None else 0.0,
        stage_cpu=tuple(sorted(stage_cpu.items())),
        processes=processes if cpu_ns is not None else (),
        cpu_ns_per_request=cpu_ns if cores is not None else None,
        pools={k: v for k, v in sizes.items() if k in seen_pools},
        unsized=unsized,
        in_flight=sum(e2e) / 1000 / window_s if window_s > 0 else 0.0,
    )
