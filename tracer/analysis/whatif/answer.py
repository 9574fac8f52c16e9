"""How a what-if is answered: the one place that picks the model (``docs/whatif.md``).

``hoptrace whatif``, ``hoptrace report``, the demo and their JSON all hand the same
question here, so that the same run and the same question get the same figure
wherever they are asked, and every answer names its model and why:

- **retime** (:mod:`tracer.analysis.whatif.retime`): each trace on its own, as if nothing
  else ran. Asked for with ``--model retime``; what ``auto`` answers for a run without
  load (at most 1.5 requests in flight on average, no waits for a pool), for a run
  whose requests started together (no arrivals to read), and for what the load model
  declines (too few traces, an overloaded run it cannot replay).
- **load** (:mod:`tracer.analysis.whatif.loadmodel`): the run's own requests replayed through
  a simulation of its load, before and after. ``--model load`` asks for it and fails
  with one line where it declines.
- **load per level**: a bench sweep, each level through its own load.

    answered = answer(what_if(traces, "inference", 10), lambda: traces, Question())
    answered.model, answered.model_reason
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from tracer._errors import ConfigError, HoptraceError
from tracer.analysis.checks.slo import Slo
from tracer.analysis.model.prepare import StageMap
from tracer.analysis.model.traceset import TraceSet
from tracer.analysis.whatif.loadmodel import project_load, sweep_knees
from tracer.analysis.whatif.loadrun import MAX_REQUESTS, LoadRun, bench_levels, load_run
from tracer.analysis.whatif.overload import no_spread
from tracer.analysis.whatif.retime import RETIMED, WhatIf, with_load
from tracer.analysis.whatif.scenario import Faster, Scenario

__all__ = ["MODELS", "Question", "answer", "load_reason", "run_of"]

#: The models a question may ask for.
MODELS = ("auto", "retime", "load")
_IN_FLIGHT = 1.5


@dataclass(frozen=True)
class Question:
    """How to answer a what-if: the model asked for (``auto``, ``retime``, ``load``)
    and what the load model needs that the traces may lack.

    Raises:
        ConfigError: a model not in :data:`MODELS`.
    """

    model: str = "auto"
    capacity: tuple[tuple[str, float], ...] = ()
    cores: float | None = None
    cpu_ms_per_request: float | None = None
    slo: Slo | None = None

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ConfigError(f"--model must be one of {', '.join(MODELS)}, got {self.model!r}")


def answer(
    result: WhatIf,
    traces: Callable[[], TraceSet],
    question: Question,
    stage_map: StageMap | None = None,
    scenario: Scenario | None = None,
) -> WhatIf:
    """``result`` (the retiming of every trace) answered as ``question`` asks: as it is,
    or with the load model's figures; ``model`` and ``model_reason`` say which and why.
    ``traces`` reads the run's traces when the load model needs them.

    Raises:
        ConfigError, HoptraceError: ``--model load`` where the load model declines.
    """
    if question.model == "retime":
        return replace(result, model="retime", model_reason=f"{RETIMED} (as asked)")
    change = scenario if scenario is not None else Faster(result.stage, result.speedup)
    try:
        if result.traces > MAX_REQUESTS:
            raise ConfigError(
                f"the load model replays one run, and {result.traces:,} traces are more than "
                f"{MAX_REQUESTS:,}: pick one run with --run"
            )
        chosen = traces()
        levels = bench_levels(chosen)
        if len(levels) > 1:
            return _each_level(result, levels, question, stage_map, change)
        run = run_of(chosen, question, stage_map)
        if (why := no_spread(run)) is not None:
            raise ConfigError(f"the load model needs a run spread in time: {why}")
        if question.model == "auto" and not run.loaded:
            return _retimed(
                result,
                f"{run.in_flight:.1f} requests in flight on average and no queue waits, so "
                "the load does not change with the speed",
            )
        projected = project_load(run, change, slo=question.slo)
    except HoptraceError as exc:
        if question.model == "load":
            raise
        return _retimed(result, str(exc))
    return with_load(result, projected, load_reason(run, projected.arrivals))


def load_reason(run: LoadRun, arrivals: str) -> str:
    """Why the load model answered, in one line: the run's load."""
    return (
        f"the run's load simulated: {arrivals}, {run.in_flight:.1f} requests "
        "in flight on average"
        + (f", {run.cores:.2f} cores shared" if run.cores else "")
        + (f", pools {_pools(run.pools)}" if run.pools else "")
    )


def _retimed(result: WhatIf, why: str) -> WhatIf:
    return replace(result, model="retime", model_reason=f"each trace retimed on its own: {why}")


def run_of(traces: TraceSet, question: Question, stage_map: StageMap | None) -> LoadRun:
    """The run's load as ``question`` completes it (capacities, cores, CPU)."""
    return load_run(
        traces,
        stage_map,
        capacity=dict(question.capacity),
        cores=question.cores,
        cpu_ms_per_request=question.cpu_ms_per_request,
    )


def _pools(pools: dict[str, int]) -> str:
    return ", ".join(f"{name} {size}" for name, size in sorted(pools.items()))


def _each_level(
    result: WhatIf,
    levels: dict[str, TraceSet],
    question: Question,
    stage_map: StageMap | None,
    scenario: Scenario,
) -> WhatIf:
    """A bench sweep: each level projected through its own load (``levels`` in the
    JSON); the figures of all levels together stay the retiming's."""
    out = []
    order = {}
    for label, traces in levels.items():
        run = run_of(traces, question, stage_map)
        projected = project_load(run, scenario, slo=question.slo)
        out.append((label, run.clients or 0, projected))
        order[label] = run.clients or run.arrival_per_s  # an open loop's: its rate
    out.sort(key=lambda level: order[level[0]])
    closed = all(clients for _, clients, _ in out)
    reason = (
        f"{len(out)} bench levels: each projected through its own load (levels); "
        "all of them together retimed trace by trace"
    )
    return replace(
        result,
        model="load per level",
        model_reason=reason,
        load_levels=tuple(out),
        load_knee=sweep_knees(out) if closed else None,
    )
