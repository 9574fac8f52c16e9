"""The demo as a library call: the chain started, the model as it is and then k times
faster, the traces waited for and analysed, and the answer to "what does a k times
faster model buy the user?".

    result = run_demo(store_path, requests=40, speedup=100)
    print(result.answer.measured_p50)
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

import tracer
from demo_app.chain import Chain
from demo_app.client import RequestResult, run_requests
from demo_app.overhead import Overhead, measure_overhead
from demo_app.profiles import get_profile
from tracer import attributes as attrs
from tracer._errors import ConfigError, HoptraceError
from tracer.analysis import Analysis, Comparison, TraceSet, WhatIf, analyze, compare, what_if
from tracer.analysis.checks.slo import Slo
from tracer.analysis.loaders.arrival import wait_for_traces
from tracer.analysis.model.substages import covers
from tracer.analysis.split import split_traces
from tracer.analysis.whatif.afford import Afford, most_calls
from tracer.analysis.whatif.answer import Question, answer
from tracer.analysis.whatif.retime import Projection
from tracer.analysis.whatif.scenario import Fanout, Repeat
from tracer.sdk.setup import prefer_prompt_export

__all__ = [
    "DEMO_SERVICES",
    "DemoAnswer",
    "DemoBuys",
    "DemoResult",
    "Progress",
    "demo_answer",
    "demo_buys",
    "demo_projections",
    "run_demo",
]

#: The services every demo trace passes through (the client is the demo process).
DEMO_SERVICES = ("client", "gateway", "app", "model")

#: The tracing-cost pass: pairs of traced and untraced runs, requests per run.
OVERHEAD_PAIRS = 2
OVERHEAD_REQUESTS = 30
OVERHEAD_TASK = "tracing cost (traced vs untraced)"

#: ``progress(event, run, done, total)``: ``"start"`` a phase, ``"advance"`` one request,
#: ``"failed"`` with the first failure's text in ``run``.
Progress = Callable[[str, str, int, int], None]


@dataclass(frozen=True, slots=True)
class DemoAnswer:
    """What a k times faster model bought: projected from the baseline's traces and
    measured on the candidate's, end to end at P50."""

    speedup: float
    projected_p50: float
    projected_after_p50_ms: float
    measured_p50: float
    baseline_p50_ms: float
    candidate_p50_ms: float
    rest: tuple[tuple[str, float], ...]  # (group, share) after the speedup, inference aside
    #: (sub-stage, realized end-to-end speedup at P50, at P90, TTFT speedup at P50) when
    #: only that part of the model is ``speedup`` times faster.
    phases: tuple[tuple[str, float, float, float | None], ...] = ()


@dataclass(frozen=True, slots=True)
class DemoBuys:
    """What the faster model affords, projected from the baseline's own traces as
    ``hoptrace whatif`` answers it: a self-check round (the model called twice in
    sequence), best-of-3 (three calls in parallel), and the most sequential calls
    that keep 90% of requests within the baseline's P90."""

    #: end-to-end P50 (ms) with the faster model alone, with a self-check round, with
    #: best-of-3
    faster_p50_ms: float
    self_check_p50_ms: float
    best_of_3_p50_ms: float
    #: the most sequential calls that fit (:class:`tracer.analysis.whatif.afford.Afford`)
    afford: Afford | None


@dataclass(frozen=True, slots=True)
class DemoResult:
    """Both runs, the projection, the comparison and the answer."""

    demo_id: str
    profile: str
    store_path: Path
    baseline: Analysis
    candidate: Analysis
    projection: WhatIf
    comparison: Comparison
    answer: DemoAnswer
    candidate_traces: TraceSet
    failures: dict[str, int]
    #: the baseline run's traces (the what-if's projected waterfall is drawn from them)
    baseline_traces: TraceSet | None = None
    phases: tuple[WhatIf, ...] = ()
    #: Requests per fallback tier (``hoptrace.fallback_tier``) in each run.
    tiers: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    #: What tracing cost per request, measured on traced and untraced loopback copies.
    overhead: Overhead | None = None
    #: What the faster model affords in calls (None: not projected).
    buys: DemoBuys | None = None


def demo_answer(
    base: Analysis, cand: Analysis, projection: WhatIf, phases: tuple[WhatIf, ...] = ()
) -> DemoAnswer:
    """The answer from the two analyses and the projections: the whole model faster,
    and each part of it (prefill, decode) faster on its own."""
    measured = base.e2e.p50 / cand.e2e.p50 if cand.e2e.p50 else float("inf")
    rest = tuple((g.name, g.share) for g in cand.groups if not covers(projection.stage, g.name))[:4]
    return DemoAnswer(
        speedup=projection.speedup,
        projected_p50=projection.realized["p50"],
        projected_after_p50_ms=projection.after.p50,
        measured_p50=measured,
        baseline_p50_ms=base.e2e.p50,
        candidate_p50_ms=cand.e2e.p50,
        rest=rest,
        phases=tuple(
            (
                w.stage,
                w.realized["p50"],
                w.realized["p90"],
                w.ttft_realized_p50,
            )
            for w in phases
        ),
    )


def run_demo(
    store_path: str | Path,
    *,
    requests: int = 40,
    warmup: int = 8,
    concurrency: int = 8,
    speedup: float = 100.0,
    profile: str = "wan",
    stream: bool = True,
    progress: Progress | None = None,
    overhead: bool = True,
) -> DemoResult:
    """Run the demo end to end; see the module docstring.

    Raises:
        ConfigError: a bad count, speedup or profile.
        ReceiverError, HoptraceError: the chain could not start.
    """
    if requests <= 0 or concurrency <= 0 or warmup < 0 or speedup <= 0:
        raise ConfigError("requests, concurrency and speedup must be positive, warmup not negative")
    get_profile(profile)
    store_path = Path(store_path)
    report: Progress = progress or (lambda _e, _r, _d, _t: None)
    prefer_prompt_export()
    demo_id = uuid.uuid4().hex[:8]
    started = time.monotonic()
    ids: dict[str, set[str]] = {}
    failures: dict[str, int] = {}
    with Chain(store_path, profile=profile) as chain:
        tracer.setup(service_name="client", endpoint=chain.collector.endpoint)
        try:
            for run, k in (("baseline", 1.0), ("candidate", speedup)):
                chain.configure_model(speedup=k)
                label = f"{demo_id}:{run}"
                if warmup:
                    _phase(
                        chain,
                        report,
                        f"{run}: warm-up",
                        warmup,
                        concurrency,
                        label + ":warmup",
                        stream,
                    )
                results = _phase(
                    chain, report, f"{run} (model x{k:g})", requests, concurrency, label, stream
                )
                ids[run] = {r.trace_id for r in results if r.status == 200}
                failed = [r for r in results if r.status != 200 or r.error]
                failures[run] = len(failed)
                if failed:
                    report("failed", f"{run}: {len(failed)} requests failed "
                           f"(first: {failed[0].status} {failed[0].error})", 0, 0)  # fmt: skip
            tracer.force_flush()
            # Only this demo's traces: the default store keeps every earlier run too.
            traces, _ = wait_for_traces(
                str(store_path),
                ids["baseline"] | ids["candidate"],
                deadline_s=20.0,
                since_s=time.monotonic() - started + 60,
                services=DEMO_SERVICES,
                poll_s=0.2,
            )
        finally:
            tracer.shutdown()
    cost = None
    if overhead:
        # A short pass on loopback copies of the chain, traced and untraced: with the
        # profile's injected delays, a fraction of a millisecond would drown in jitter.
        report("start", OVERHEAD_TASK, 0, OVERHEAD_PAIRS)
        try:
            cost = measure_overhead(
                requests=OVERHEAD_REQUESTS,
                warmup=5,
                pairs=OVERHEAD_PAIRS,
                progress=lambda _n, _t: report("advance", OVERHEAD_TASK, 1, OVERHEAD_PAIRS),
            )
        except (RuntimeError, httpx.HTTPError, HoptraceError) as exc:
            # The demo's answer stands without it.
            report("failed", f"tracing cost not measured: {exc}", 0, 0)
    baseline_traces = traces.subset(ids["baseline"])
    candidate_traces = traces.subset(ids["candidate"])
    base = analyze(baseline_traces)
    cand = analyze(candidate_traces)
    projection, *rest = demo_projections(
        baseline_traces,
        speedup,
        [attrs.INFERENCE]
        + [
            phase
            for phase in (attrs.INFERENCE_PREFILL, attrs.INFERENCE_DECODE)
            if any(g.name == phase for g in base.groups)
        ],
    )
    phases = tuple(rest)
    try:
        buys = demo_buys(baseline_traces, speedup, projection)
    except HoptraceError as exc:  # the demo's answer stands without it
        report("failed", f"what the faster model affords not projected: {exc}", 0, 0)
        buys = None
    return DemoResult(
        buys=buys,
        demo_id=demo_id,
        profile=profile,
        store_path=store_path,
        baseline=base,
        candidate=cand,
        projection=projection,
        comparison=compare(base, cand),
        answer=demo_answer(base, cand, projection, phases),
        phases=phases,
        tiers={
            "baseline": _tiers(baseline_traces),
            "candidate": _tiers(candidate_traces),
        },
        overhead=cost,
        candidate_traces=candidate_traces,
        failures=failures,
        baseline_traces=baseline_traces,
    )


def demo_projections(traces: TraceSet, speedup: float, stages: list[str]) -> list[WhatIf]:
    """Each stage ``speedup`` times faster, projected from the baseline's traces and
    answered as ``hoptrace whatif`` answers it (:func:`tracer.analysis.whatif.answer.answer`:
    the same model for the whole model and each part of it)."""
    return [answer(what_if(traces, stage, speedup), lambda: traces, Question()) for stage in stages]


#: The load model's simulated requests for each number of calls the search tries.
SEARCH_REQUESTS = 600


def demo_buys(traces: TraceSet, speedup: float, faster: WhatIf) -> DemoBuys:
    """What the model ``speedup`` times faster affords (:class:`DemoBuys`), answered
    as ``hoptrace whatif --repeat/--fanout`` answers it."""
    stage = attrs.INFERENCE

    def p50(change: Repeat | Fanout) -> float:
        w = what_if(traces, stage, speedup, changes=(change,))
        scenario = Projection(stage, speedup, (change,)).scenario
        return answer(w, lambda: traces, Question(), scenario=scenario).after.p50

    limit = analyze(traces).e2e.p90
    question = Question(slo=Slo((("e2e", float(limit)),)))
    most = most_calls(
        traces, Projection(stage, speedup), stage, False, question, requests=SEARCH_REQUESTS
    )
    return DemoBuys(
        faster_p50_ms=faster.after.p50,
        self_check_p50_ms=p50(Repeat(stage, 2)),
        best_of_3_p50_ms=p50(Fanout(stage, 3)),
        afford=most.afford if isinstance(most.afford, Afford) else None,
    )


def _tiers(traces: TraceSet) -> dict[str, int]:
    """Traces per fallback tier; empty when no trace carries one."""
    try:
        parts = split_traces(traces, attrs.FALLBACK_TIER)
    except ConfigError:
        return {}
    return {tier: len(part.traces) for tier, part in parts}


def _phase(
    chain: Chain,
    report: Progress,
    title: str,
    count: int,
    concurrency: int,
    run: str,
    stream: bool,
) -> list[RequestResult]:
    report("start", title, 0, count)
    return run_requests(
        chain.base_url,
        chain.api_key,
        requests=count,
        concurrency=concurrency,
        run=run,
        stream=stream,
        on_done=lambda _r: report("advance", title, 1, count),
    )
