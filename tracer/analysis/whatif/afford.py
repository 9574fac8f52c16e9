"""The most calls that fit an SLO (``docs/whatif.md``, more calls): with
``--repeat STAGE=max`` or ``--fanout STAGE=max`` and ``--slo``, the largest N whose
SLO attainment still holds after the change, searched upward from one call to
:data:`~tracer.analysis.whatif.scenario.MAX_CALLS` (doubling, then halving the gap).

"Holds" is the bench's rule for a level meeting its SLO: at least the attainment
target (``hoptrace bench --slo-attainment``, 90% of requests) meet every limit. Each N
is answered with the model :func:`~tracer.analysis.whatif.answer.answer` picks for the run
(the load model's calibration found once), so its P50, P90, goodput and attainment
are those ``hoptrace whatif`` prints for that N.

    best = most_calls(traces, Projection("inference", 100), "inference", False, question)
    best.afford.calls
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tracer._errors import ConfigError
from tracer.analysis.checks.cost import cost_after
from tracer.analysis.checks.slo import Slo
from tracer.analysis.model.prepare import StageMap
from tracer.analysis.model.traceset import TraceSet
from tracer.analysis.table._table import _NONE, Columns
from tracer.analysis.whatif.answer import Question, answer, load_reason, run_of
from tracer.analysis.whatif.loadmodel import calibrate, project_load
from tracer.analysis.whatif.retime import Projection, WhatIf, project_columns, with_load
from tracer.analysis.whatif.scenario import MAX_CALLS, Fanout, Repeat

__all__ = ["Afford", "attainment_target", "most_calls"]


def attainment_target() -> float:
    """The share of requests that must meet the SLO (the bench's default)."""
    from tracer.analysis.checks.sweep import DEFAULT_ATTAINMENT

    return DEFAULT_ATTAINMENT


@dataclass(frozen=True)
class Afford:
    """The most calls of ``stage`` (in sequence, or in parallel) that fit the SLO."""

    stage: str
    parallel: bool
    #: the largest N that holds (0: not even one call)
    calls: int
    #: the search's bound (the answer may be larger when ``calls`` reaches it)
    bound: int
    slo: Slo
    target: float
    #: at ``calls`` (at one call when none holds): the share meeting the SLO, P50 and
    #: P90 (ms), goodput (requests/s meeting it; the load model's) and cost per request
    attainment: float
    p50_ms: float
    p90_ms: float
    goodput_per_s: float | None
    cost_per_request: float | None
    model: str
    #: every N tried, with its attainment, in the order tried
    tried: tuple[tuple[int, float], ...]

    def describe(self) -> str:
        """One sentence: how many calls fit, and what they cost."""
        how = "in parallel (best-of-N)" if self.parallel else "in sequence"
        within = f"within {self.slo.describe()} for {self.target * 100:.0f}% of requests"
        if self.calls == 0:
            return (
                f"{within}, not even one {self.stage} call fits: "
                f"{self.attainment * 100:.0f}% of requests meet it"
            )
        more = " (the most searched; more may fit)" if self.calls >= self.bound else ""
        goodput = (
            f", goodput {self.goodput_per_s:.1f} requests/s"
            if self.goodput_per_s is not None
            else ""
        )
        cost = (
            f", {self.cost_per_request:.4g} per request"
            if self.cost_per_request is not None
            else ""
        )
        return (
            f"{within}, {self.calls} {self.stage} calls {how} fit{more}: P50 "
            f"{self.p50_ms:,.0f} ms, P90 {self.p90_ms:,.0f} ms, "
            f"{self.attainment * 100:.0f}% meet it{goodput}{cost}"
        )


def _retimed_attainment(columns: Columns, slo: Slo) -> float:
    """The share of traces whose retimed times meet every limit of ``slo``."""
    p = columns.projected
    if p is None or not len(columns):
        return 0.0
    met = np.ones(len(columns), dtype=bool)
    e2e, ttft = slo.limit_ms("e2e"), slo.limit_ms("ttft")
    if e2e is not None:
        met &= p.after_ns / 1e6 <= e2e
    if ttft is not None:
        met &= (p.ttft_before_ns != _NONE) & (p.ttft_after_ns / 1e6 <= ttft)
    return float(met.mean())


def most_calls(
    traces: TraceSet,
    base: Projection,
    stage: str,
    parallel: bool,
    question: Question,
    stage_map: StageMap | None = None,
    cost_one: float | None = None,
    requests: int = 3000,
) -> WhatIf:
    """The what-if at the most calls of ``stage`` that fit ``question.slo`` (at one call
    when none does), with :class:`Afford` in its ``afford``. ``base`` holds the rest
    of the change (the speedup); ``cost_one`` the cost of a request as measured;
    ``requests``: the load model's simulated requests for each N.

    Raises:
        ConfigError: no SLO, or a bench sweep (several runs) to search over.
    """
    slo = question.slo
    option = "--fanout" if parallel else "--repeat"
    if slo is None:
        raise ConfigError(
            f"{option} {stage}=max needs --slo (e.g. --slo e2e=2s): the most calls that "
            "still meet it"
        )
    kind = Fanout if parallel else Repeat
    target = attainment_target()
    draws = replace(base, changes=(*base.changes, kind(stage, 2))).drawn(traces, stage_map).draws
    first = _at(traces, base, kind, stage, 1, draws, stage_map)
    answered = answer(first[0], lambda: traces, question, stage_map, first[1].scenario)
    if answered.model == "load per level":
        raise ConfigError(f"{option} {stage}=max searches one run: pick one bench level with --run")
    state: dict[str, object] = {}

    def judged(n: int) -> tuple[WhatIf, float]:
        w, projection, columns = _at(traces, base, kind, stage, n, draws, stage_map)
        if answered.model == "load":
            if "run" not in state:
                state["run"] = run_of(traces, question, stage_map)
                state["stretch"] = calibrate(state["run"], requests)  # type: ignore[arg-type]
            run = state["run"]
            got = project_load(
                run,  # type: ignore[arg-type]
                projection.scenario,
                slo=slo,
                stretch=state["stretch"],  # type: ignore[arg-type]
                requests=requests,
            )
            w = with_load(w, got, load_reason(run, got.arrivals))  # type: ignore[arg-type]
            share = got.attainment[1] if got.attainment is not None else 0.0
        else:
            w = replace(w, model=answered.model, model_reason=answered.model_reason)
            share = _retimed_attainment(columns, slo)
        return replace(w, cost_per_request=_costs(cost_one, projection)), share

    tried: dict[int, tuple[WhatIf, float]] = {}

    def holds(n: int) -> bool:
        if n not in tried:
            tried[n] = judged(n)
        return tried[n][1] >= target

    best = 0
    if holds(1):
        best, n = 1, 2
        while n <= MAX_CALLS and holds(n):
            best, n = n, n * 2
        high = min(n, MAX_CALLS + 1)
        while high - best > 1:  # best holds, high does not (or is past the bound)
            mid = (best + high) // 2
            if holds(mid):
                best = mid
            else:
                high = mid
    w, share = tried[max(best, 1)]
    cost = w.cost_per_request[1] if w.cost_per_request is not None else None
    afford = Afford(
        stage=stage,
        parallel=parallel,
        calls=best,
        bound=MAX_CALLS,
        slo=slo,
        target=target,
        attainment=share,
        p50_ms=w.after.p50,
        p90_ms=w.after.p90,
        goodput_per_s=w.load.goodput_per_s[1]
        if w.load is not None and w.load.goodput_per_s is not None
        else None,
        cost_per_request=cost,
        model=w.model,
        tried=tuple((n, s) for n, (_, s) in tried.items()),
    )
    return replace(w, afford=afford)


def _costs(cost_one: float | None, projection: Projection) -> tuple[float, float] | None:
    if cost_one is None:
        return None
    after = cost_after(cost_one, projection.scenario)
    return None if after is None else (cost_one, after)


def _at(
    traces: TraceSet,
    base: Projection,
    kind: type[Repeat] | type[Fanout],
    stage: str,
    n: int,
    draws: tuple[tuple[str, tuple[float, ...]], ...],
    stage_map: StageMap | None,
) -> tuple[WhatIf, Projection, Columns]:
    """The retiming with ``n`` calls of ``stage``."""
    projection = replace(base, changes=(*base.changes, kind(stage, n)), draws=draws)
    w, columns = project_columns(traces, projection, stage_map)
    return w, projection, columns
