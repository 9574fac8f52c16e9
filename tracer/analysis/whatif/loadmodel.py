"""What-if under load (``docs/whatif.md``): a run's own requests
(:mod:`tracer.analysis.whatif.loadrun`), each with its dependencies, replayed through a
simulation of its load (:mod:`tracer.analysis.whatif.simulate`), once as measured and once
with the change (a :class:`~tracer.analysis.whatif.scenario.Scenario`).

- **CPU and waiting.** The chain's CPU per request is spread over each request's
  stretches by their length and served by a processor-shared CPU of the chain's cores:
  the more requests run at once, the slower each burst. What is left of a stretch,
  less its CPU at the run's own contention, is waiting time that the load does not
  change (a sleep, the network, a GPU). The change multiplies the waiting time of
  each stretch by the scenario's factor for its stage; the CPU stays, except that CPU
  per request falls as throughput rises (:data:`CPU_SCALING`), and a stage k times
  faster costs k ** -:data:`SPEED_CPU_SCALING` of its CPU and keeps 1/k of its
  in-line CPU in line, the rest moved beside the waits of the same stretch.
- **Processes.** Each of the chain's services runs its CPU in its own processes, one
  event loop each: a burst runs in one of them, drawn by their shares of the chain's
  CPU, and a process never gets more than a core however many are free
  (:data:`PROCESS_LOOPS`). A service busy at half a core makes its requests queue for
  its loop long before the host's cores run out. The CPU in line with a stretch is
  paced through its wait in pieces of at most :data:`LOOP_PIECE_MS`, and a loop runs
  its pieces one at a time, first come first served, as asyncio runs its callbacks:
  requests that reach a busy loop together leave it one after another, not in
  lockstep.
- **Arrivals.** A closed loop keeps its clients. An open loop replays the run's own
  arrivals once, as they came, each with the request that arrived then (the same
  before and after): a finite run near its capacity is not its steady state, and a
  run whose queue grew through it (overloaded,
  :func:`~tracer.analysis.whatif.overload.overload`) had none.
- **Calibration.** The run's own contention is not known in advance: the share of
  each stretch that was CPU stretched by contention is found by bisection, so that
  the simulated run as measured has the measured mean end-to-end time.

The projection is the measured percentile times the simulated ratio of after to
before at that percentile, so that what the model gets wrong about the run as it was
cancels out; the projected percentiles are then kept in order (P90 at least P50).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tracer._errors import ConfigError
from tracer.analysis.aggregate import Stats, stats
from tracer.analysis.checks.slo import Slo
from tracer.analysis.whatif.expand import expand_templates
from tracer.analysis.whatif.loadgraph import Stretch, Template
from tracer.analysis.whatif.loadrun import LoadRun
from tracer.analysis.whatif.overload import Overload, overload
from tracer.analysis.whatif.scenario import Scenario
from tracer.analysis.whatif.simulate import ACQUIRE, CPU, DELAY, Graph, Simulated, Step, simulate

__all__ = [
    "CPU_FULL",
    "CPU_SCALING",
    "FANOUT_RELAY_SPEED",
    "INLINE_SHARE",
    "PARALLEL_BUSY",
    "PROCESS_LOOPS",
    "SATURATED",
    "SPEED_CPU_SCALING",
    "LoadWhatIf",
    "calibrate",
    "project_load",
    "sweep_knees",
]

_MS = 1e6


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
    #: the run was overloaded (its queue grew through it) and was replayed as it happened
    overloaded: Overload | None = None
    #: with an SLO: its limits (ms), the share of requests meeting it and the goodput
    #: (requests/s meeting it), before (measured) and after (projected)
    slo_limits_ms: tuple[tuple[str, float], ...] = ()
    attainment: tuple[float, float] | None = None
    goodput_per_s: tuple[float, float] | None = None


#: CPU per request falls as throughput rises (event loops handle more ready events a
#: wake-up, fixed-rate work is spread over more requests): x (throughput ratio) ** -this.
#: On the calls protocol's eighteenth run in docs/whatif.md, the single-call runs cost
#: 71, 62 and 45 ms a request at 3.9, 6 and 12 requests/s (x ** -0.4); chosen among
#: 0.2 (the earlier passes' value), 0.3 and 0.4 on that run's kept runs.
CPU_SCALING = 0.3
#: The share of the chain's CPU per request that runs in line with the request's waits
#: and lengthens its stretches; the rest runs beside them (a stream's relays working on
#: one token while the model waits for the next, the exporters' threads): for each
#: stretch, a branch of the request of its own from the stretch's start, paced through
#: the same wait, that loads the cores and the loops as much and lengthens the request
#: when it outlasts the stretch. Chosen on the first pass of the protocol in
#: docs/whatif.md, among 1, 0.75, 0.5 and 0.25. A stage k times faster keeps 1/k of its
#: stretches' in-line share; the rest joins their branches.
INLINE_SHARE = 0.5
#: Each service of the chain runs its CPU on one event loop per process: at most a
#: core per process (its instances' count), beside the host's cores shared by all.
#: The CPU in line with the waits is drawn to a service per stretch by the services'
#: shares, and so is each stretch's CPU beside them, apart. Measured on fresh runs
#: of the protocol in docs/whatif.md.
PROCESS_LOOPS = True
#: The in-line CPU of a stretch comes in pieces of at most this many milliseconds,
#: between equal pieces of its wait (a stream's relays handle one token, wait for the
#: next), each run by its process's loop in turn (with :data:`PROCESS_LOOPS`). One
#: burst at the end of a long stretch would hold its loop for all of it; bursts
#: shared by the loop instead of taken in turn finish in lockstep, so a closed loop
#: held back by the CPU showed no tail (its P90 12-18% short on the fresh passes in
#: docs/whatif.md). Chosen on the kept runs of the fifth to eighth load passes and
#: the calls' seventh to ninth, among 1, 2 and 3 ms.
LOOP_PIECE_MS = 1.0
#: The one answer kept of a stage's calls in parallel (``--fanout``) reaches the chain's
#: relays (the gateway, the client: all but the stage's own processes and its caller's
#: part) once all are in, in one burst,
#: not token by token as a single call's stream does: their part of the stage's CPU
#: costs what it does for a stage this many times faster. Measured on the calls
#: protocol in docs/whatif.md (its eighteenth run): best-of-2 with the model as it is,
#: at the single call's throughput, cost the gateway and the client 0.6 of their CPU a
#: request with one call (100 ** -SPEED_CPU_SCALING is 0.55), while the app and the
#: model server spent the copy's; chosen among 1 and 100 on that run's kept runs.
FANOUT_RELAY_SPEED = 100.0
#: After a change that makes a stage's calls in parallel (``--fanout``), the chain's
#: cores this busy in the simulation: the projection came out short on real runs, the
#: slowest requests most. The parallel calls of one request reach the server one after
#: another once the loops are busy (on the calls protocol in docs/whatif.md, the last
#: of them reached the model server 17 ms after the first with best-of-3 at 8 clients,
#: 0.6 ms with best-of-2 at 6 requests/s, the model 100x faster in both), which the
#: simulation reproduces only in part. On the eighth to twelfth fresh runs there,
#: best-of-3 with the cores 52-98% busy came out 3-25% short at P50 and 7-37% at P90;
#: best-of-N with them 10-29% busy, within 5%. With the CPU beside the waits kept with
#: each stretch (the thirteenth run), best-of-3 with the cores 61-82% busy came out
#: -4% to +4% at P50 and 3-14% short at P90; with a faster stage's CPU falling with its
#: speed or the throughput, the lesser (the fourteenth and fifteenth), -1% to +12% at
#: P50 and 2-13% short at P90.
PARALLEL_BUSY = 0.5
#: An overloaded run's replay must keep a resource this busy: what ran out.
SATURATED = 0.9
#: After the change, the chain's cores this busy in the simulation: the CPU holds the
#: chain back, and the projection says it is least sure there (on the fresh passes in
#: docs/whatif.md, every projection more than 8% off had its cores at least this busy).
CPU_FULL = 0.9
#: A stage k times faster costs the chain k ** -this of its CPU: a faster model's
#: tokens reach the relays in fewer, fuller pieces. The throughput's rise saves the
#: same (x ** -:data:`CPU_SCALING`: more events a wake-up, from more requests at once
#: or from one stream's tokens together), so the stage's CPU gets the lesser of the
#: two factors, not their product. On the calls protocol in docs/whatif.md,
#: in open loops at 6 requests/s (the same throughput), a call of a model 100x faster
#: cost the chain about 18.7 ms of CPU against 34.4 ms as it is (0.54); chosen among
#: 0.05 and 0.13 on the kept runs there and of the load protocol.
SPEED_CPU_SCALING = 0.13


def _steps(
    run: LoadRun,
    scenario: Scenario | None,
    stretch: float,
    templates: Sequence[Template] | None = None,
    ratio: float = 1.0,
) -> list[Graph]:
    """Simulation steps of every template (default: the run's; with a scenario's
    calls, :func:`~tracer.analysis.whatif.expand.expand_templates` of them): the
    in-line CPU at ``stretch`` taken out of each stretch, its waiting time multiplied
    by ``scenario``'s factor for its stage (none: as measured); at ``ratio`` times the
    run's throughput, the run's CPU per request times ``ratio`` ** -CPU_SCALING. Each
    stretch's CPU beside the waits runs beside it, from its start. A call's copies bring
    the CPU of the stage's own processes with them (:func:`_copies`), in line and beside
    alike."""
    measured = (run.cpu_ns_per_request or 0.0) * INLINE_SHARE
    total = (run.cpu_ns_per_request or 0.0) * ratio**-CPU_SCALING
    cpu = total * INLINE_SHARE
    own = dict(run.stage_cpu)
    names = [name for name, _, _ in run.processes] if PROCESS_LOOPS else []
    weights = [share for _, share, _ in run.processes]
    out = []
    for k, t in enumerate(run.templates if templates is None else templates):
        scale = {} if templates is None else _copies(run.templates[k], t, own, scenario, ratio)
        # Each burst runs in one of the chain's processes, drawn by their shares of
        # its CPU (the same draws for a template every time).
        pick = random.Random(k)
        nodes = []
        nodes_beside: list[tuple[tuple[Step, ...], tuple[int, ...]]] = []
        after = t.after
        for i, items in enumerate(t.nodes):
            steps: list[Step] = []
            for x in items:
                if not isinstance(x, Stretch):
                    steps.append(Step(x.kind, pool=x.pool) if x.kind == ACQUIRE else x)
                    continue
                part = x.ns / t.busy_ns if t.busy_ns > 0 else 0.0
                # A stage k times faster costs k ** -SPEED_CPU_SCALING of its CPU, or
                # the throughput's factor already in ``total`` when that is less.
                fewer = 1.0 if scenario is None else _fewer(scenario.factor(x.stage), ratio)
                portion = part * scale.get(_top(x.stage), 1.0) * fewer
                share, beside = cpu * portion, (total - cpu) * portion
                if scenario is not None:
                    # A stage k times faster keeps 1/k of its in-line CPU in line; the
                    # rest joins its CPU beside the waits (a faster model's tokens
                    # reach the relays a few at a time).
                    moved = share * (1 - min(scenario.factor(x.stage), 1.0))
                    share -= moved
                    beside += moved
                # At the run's own contention, ``stretch`` times the CPU was spent in it.
                wait = max(x.ns - measured * part * stretch, 0.0)
                if scenario is not None:
                    wait *= scenario.factor(x.stage)
                if beside > 0:
                    # Beside the stretch, from its start: a node of its own (a stream's
                    # relays working while the model waits for the next token), paced
                    # through the same wait, which the request's end waits for.
                    node = _paced(beside, wait, pick.choices(names, weights)[0] if names else "")
                    nodes_beside.append((node, after[i] or (0,)))
                if share > 0:
                    where = pick.choices(names, weights)[0] if names else ""
                    steps.extend(_paced(share, wait, where))
                elif wait > 0:
                    steps.append(Step(DELAY, wait))
            nodes.append(tuple(steps))
        for node, before in nodes_beside:
            nodes.append(node)
            after = (*after, before)
        out.append(Graph(tuple(nodes), after))
    return out


def _fewer(factor: float, ratio: float = 1.0) -> float:
    """What a stage ``factor`` times as long (1/k: k times faster) costs of its CPU
    at ``ratio`` times the run's throughput, over the ``ratio`` ** -CPU_SCALING that
    all of the chain's CPU gets: k ** -SPEED_CPU_SCALING in all when that is less."""
    if factor >= 1.0:
        return 1.0
    return min(1.0, factor**SPEED_CPU_SCALING * max(ratio, 1.0) ** CPU_SCALING)


def _paced(cpu_ns: float, wait_ns: float, where: str) -> tuple[Step, ...]:
    """``cpu_ns`` of CPU in ``where``'s loop (none: the host's cores), in pieces of at
    most :data:`LOOP_PIECE_MS`, each after an equal piece of ``wait_ns``."""
    pieces = max(int(np.ceil(cpu_ns / (LOOP_PIECE_MS * _MS))), 1)
    out: list[Step] = []
    for _ in range(pieces):
        if wait_ns > 0:
            out.append(Step(DELAY, wait_ns / pieces))
        out.append(Step(CPU, cpu_ns / pieces, pool=where, loop=bool(where)))
    return tuple(out)


def _top(stage: str) -> str:
    return stage.split(".", 1)[0]


def _by_stage(t: Template) -> dict[str, float]:
    """A template's stretches (ns) by top stage."""
    out: dict[str, float] = {}
    for node in t.nodes:
        for x in node:
            if isinstance(x, Stretch):
                out[_top(x.stage)] = out.get(_top(x.stage), 0.0) + x.ns
    return out


def _copies(
    was: Template,
    now: Template,
    own: dict[str, float],
    scenario: Scenario | None = None,
    ratio: float = 1.0,
) -> dict[str, float]:
    """What a request's copied calls cost in CPU: for each stage with copies, the factor
    on its stretches' CPU (in line and beside the waits alike).

    One more call of a stage costs the CPU of the stage's own processes (``own``: their
    share of the chain's, a model server's for ``inference``): not the chain's relays
    and the client's, which handle one answer however many calls made it. A stage
    without processes of its own costs its stretches' share of the CPU by length.
    A copy of a call k times faster costs what the call does, k ** -SPEED_CPU_SCALING
    of it (:func:`_fewer`, in :func:`_steps`). When the calls run in parallel, the one
    answer kept reaches the relays once all are in, in one burst: the relays' part of
    the stage's CPU (all but its own processes') costs what it does for a stage
    :data:`FANOUT_RELAY_SPEED` times faster, when that is less.
    """
    before, after = _by_stage(was), _by_stage(now)
    busy = was.busy_ns
    scale: dict[str, float] = {}
    for stage, ns in after.items():
        o = before.get(stage, 0.0)
        if o <= 0 or ns <= o or busy <= 0:
            continue
        calls = ns / o  # the stage's time in calls of it (2: one more)
        first = o / busy  # the call's share of the CPU per request, as in the run
        per_call = own.get(stage, first)  # what one more call brings
        if scenario is not None and scenario.calls(stage).parallel:
            f = min(scenario.factor(stage), 1.0)
            relays = max(first - own.get(stage, first), 0.0)
            burst = _fewer(min(f, 1.0 / FANOUT_RELAY_SPEED), ratio) / _fewer(f, ratio)
            first -= relays * (1.0 - burst)
        scale[stage] = (first + (calls - 1) * per_call) / (ns / busy)
    return scale


def _run(run: LoadRun, graphs: list[Graph], requests: int, seed: int) -> Simulated:
    """The simulated run: a closed loop of its clients (``requests`` after a warm-up),
    or an open loop of its own arrivals, once, as they came."""
    cores, pools, others = run.cores or 1.0, run.pools, run.other_cores
    loops = {name: float(n) for name, _, n in run.processes} if PROCESS_LOOPS else None
    if run.clients:
        warmup = max(2 * run.clients, 50)
        return simulate(
            graphs,
            cores=cores,
            pools=pools,
            clients=run.clients,
            others=others,
            loops=loops,
            requests=requests,
            warmup=warmup,
            seed=seed,
        )
    # An open loop: its own arrivals, once, as they came (a finite run near its
    # capacity is not its steady state; an overloaded one has none).
    order = sorted(range(len(run.starts_s)), key=lambda i: run.starts_s[i])
    schedule = [(run.starts_s[i] * 1e9, i) for i in order]
    return simulate(
        graphs,
        cores=cores,
        pools=pools,
        schedule=schedule,
        others=others,
        loops=loops,
        requests=len(schedule),
        warmup=0,
    )


def calibrate(run: LoadRun, requests: int = 3000, seed: int = 1) -> float:
    """The run's own CPU stretch: how much its contention stretched its CPU, found by
    bisection so that the simulated run as measured has its measured mean (1 without
    a CPU measure). It does not depend on the change, so one serves many."""
    if not (run.cpu_ns_per_request and run.cores):
        return 1.0
    measured = float(np.mean(run.e2e_ms))
    lo, hi = 1.0, 64.0
    half = requests // 2
    for _ in range(14):
        mid = (lo + hi) / 2
        got = np.mean(_run(run, _steps(run, None, mid), half, seed).e2e_ns) / _MS
        if got > measured:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def project_load(
    run: LoadRun,
    scenario: Scenario,
    *,
    slo: Slo | None = None,
    requests: int = 3000,
    seed: int = 1,
    stretch: float | None = None,
) -> LoadWhatIf:
    """``scenario`` projected through the run's load; with ``slo`` (``ttft`` and ``e2e``
    limits), its attainment and goodput before and after. ``stretch``: the run's
    :func:`calibrate`, when already found.

    Raises:
        ConfigError: the run was overloaded, and the simulation of it as it was does
            not reproduce its queue (its traces do not name what ran out).
    """
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
    jam = overload(run)
    if stretch is None:
        stretch = calibrate(run, requests, seed)
    base = _run(run, _steps(run, None, stretch), requests, seed)
    if jam is not None and _busiest(base, run) < SATURATED:
        # Replayed with no resource running out, the queue would stay in the requests'
        # times as if it were work, and a faster stage would shorten it.
        raise ConfigError(
            f"the run was overloaded ({jam.describe()}) and its traces do not say what ran "
            "out, so the load model cannot replay it (give --capacity NAME=N or --cores)"
        )
    expanded = expand_templates(run.templates, scenario)
    after = _run(run, _steps(run, scenario, stretch, expanded), requests, seed)
    if run.cpu_ns_per_request and run.cores:
        # The CPU per request at the throughput the change reaches (a fixed point).
        for _ in range(4):
            ratio = after.throughput_per_s / base.throughput_per_s if base.throughput_per_s else 1.0
            after = _run(run, _steps(run, scenario, stretch, expanded, ratio), requests, seed)
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
    elif util.get("cpu", 0.0) >= PARALLEL_BUSY and _parallel(run, scenario):
        notes.append(
            f"parallel calls with the chain's cores {util['cpu']:.0%} busy: on real runs "
            "like this one the projection's tail came out short, its median off either "
            "way (docs/whatif.md has by how much)"
        )
    elif util.get("cpu", 0.0) >= CPU_FULL:
        notes.append(
            f"after the change the chain's cores are {util['cpu']:.0%} busy: where the CPU "
            "holds the chain back the projection is least sure, its tail most of all "
            "(docs/whatif.md has how far off it was on real runs)"
        )
    bottleneck = max(util, key=lambda k: util[k]) if util else "none"
    if run.clients:
        arrivals = f"a closed loop of {run.clients} clients"
    elif jam is not None:
        arrivals = f"the run's own arrivals replayed as they came ({jam.describe()})"
    else:
        arrivals = (
            f"an open loop of the run's own arrivals ({run.arrival_per_s:.1f} requests/s), "
            "replayed as they came"
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
        overloaded=jam,
    )


def _parallel(run: LoadRun, scenario: Scenario) -> bool:
    """Whether ``scenario`` makes more calls in parallel of a stage in the run."""
    stages = {
        x.stage for t in run.templates for node in t.nodes for x in node if isinstance(x, Stretch)
    }
    return any((c := scenario.calls(stage)).parallel and c.n > 1 for stage in stages)


def _busiest(sim: Simulated, run: LoadRun) -> float:
    """The utilization of the busiest resource the run's traces name (the CPU only
    when they measure it)."""
    util = {k: v for k, v in sim.utilization.items() if k != "cpu" or run.cores is not None}
    return max(util.values(), default=0.0)


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

    # Each percentile moves by its own ratio; kept in order (a queue that drains can
    # shrink the P90 more than the P50, never below it).
    low, p50, p90, p99, high = (
        getattr(measured, k) * ratio(k) for k in ("min", "p50", "p90", "p99", "max")
    )
    p90 = max(p90, p50)
    p99 = max(p99, p90)
    return Stats(
        n=measured.n,
        mean=measured.mean * ratio("mean"),
        p50=p50,
        p90=p90,
        p99=p99,
        min=min(low, p50),
        max=max(high, p99),
    )


@dataclass
class _SweepLevel:
    """A bench level as the knee rule reads it (``tracer.analysis.checks.sweep.find_knee``)."""

    concurrency: int
    stats: Stats
    throughput: float
    samples: list = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def ok(self) -> list[bool]:
        return [True]

    def e2e(self) -> Stats:
        return self.stats

    def requests_per_s(self) -> float:
        return self.throughput


def sweep_knees(levels: Sequence[tuple[str, int, LoadWhatIf]]) -> tuple[int | None, int | None]:
    """A sweep's knee (``docs/bench.md``) as measured, and where it moves after the
    change: the knee rule on each level's measured and projected figures."""
    from tracer.analysis.checks.sweep import find_knee

    before = find_knee(
        [_SweepLevel(c, lw.before, lw.throughput_before_per_s) for _, c, lw in levels]
    )
    after = find_knee([_SweepLevel(c, lw.after, lw.throughput_after_per_s) for _, c, lw in levels])
    return (
        before.concurrency if before is not None else None,
        after.concurrency if after is not None else None,
    )
