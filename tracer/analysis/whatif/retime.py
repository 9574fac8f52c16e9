"""What-if: "stage X becomes k times faster" (``docs/analysis.md``, what-if).

Every trace is retimed with its dependencies kept (:mod:`tracer.analysis.model.dependencies`,
the model the critical-path walk reads too): the own time of each span is multiplied
by the scenario's factor for its stage (:mod:`tracer.analysis.whatif.scenario`: for stage X
k times faster, 1/k in X and 1 elsewhere). A child starts its offset after the
latest new end of the earlier siblings it waited for, else after its parent's start;
that offset is the parent's own time, so it shrinks only when the parent is in X. A
span ends its own trailing time after its children's new ends. On a sequential chain
this is Amdahl's law on the critical path; with parallel work a sibling that was
hidden can become critical.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from tracer._errors import ConfigError, NoUsableDataError
from tracer.analysis.aggregate import NS_PER_MS, Stats, stats
from tracer.analysis.model.breakdown import client_first_token, group_key
from tracer.analysis.model.critical_path import trace_dependencies, ttft_view
from tracer.analysis.model.dependencies import critical_times
from tracer.analysis.model.dependencies import retime as retime_model
from tracer.analysis.model.prepare import PreparedTrace, StageMap
from tracer.analysis.model.substages import covers
from tracer.analysis.model.traceset import TraceSet
from tracer.analysis.sampling._sketch import exact_traces as exact_limit
from tracer.analysis.sampling._sketch import sketch_note
from tracer.analysis.table._memory import gc_paused
from tracer.analysis.table._table import _NONE, Columns, Projected
from tracer.analysis.whatif.expand import Added, call_times, retime_with_calls, ttft_extra_ns
from tracer.analysis.whatif.loadmodel import LoadWhatIf
from tracer.analysis.whatif.scenario import Combined, Faster, Scenario
from tracer.spans.model import Warnings

__all__ = [
    "Projection",
    "WhatIf",
    "ideal_speedup",
    "project",
    "project_columns",
    "retime",
    "what_if",
    "with_load",
]


#: Why a what-if was retimed, unless its answer says more.
RETIMED = "each trace retimed on its own, as if nothing else ran"


@dataclass(frozen=True, slots=True)
class WhatIf:
    """Before/after end-to-end percentiles (ms) and shares after the change."""

    stage: str
    speedup: float
    traces: int
    before: Stats
    after: Stats
    realized: dict[str, float]
    before_groups: tuple[tuple[str, float], ...]
    after_groups: tuple[tuple[str, float], ...]
    stage_share: float
    skipped_traces: int
    messages: tuple[str, ...]
    ttft_before: Stats | None = None
    ttft_after: Stats | None = None
    #: which model projected ``after``: ``retime`` (each trace on its own) or ``load``
    #: (the run's load simulated: ``load`` holds its figures), and why
    model: str = "retime"
    model_reason: str = RETIMED
    load: LoadWhatIf | None = None
    #: a bench sweep's levels, each projected through its own load: (run, clients, it)
    load_levels: tuple[tuple[str, int, LoadWhatIf], ...] = ()
    #: the sweep's knee (``docs/bench.md``) as measured and after the change (None: none)
    load_knee: tuple[int | None, int | None] | None = None
    #: the change in words (``inference 100x faster and inference called 2 times in
    #: sequence``)
    change: str = ""
    #: the calls the change makes more of: (stage, N, in parallel)
    calls: tuple[tuple[str, int, bool], ...] = ()
    #: with prices: the mean cost of a request before and after (the model's tokens
    #: scale with its calls)
    cost_per_request: tuple[float, float] | None = None
    #: with ``--repeat/--fanout STAGE=max`` and an SLO: the most calls that fit
    #: (:class:`tracer.analysis.whatif.afford.Afford`)
    afford: object | None = None

    @property
    def ttft_realized_p50(self) -> float | None:
        """How many times sooner the first token comes at P50 (None without marks)."""
        if self.ttft_before is None or self.ttft_after is None or self.ttft_after.p50 <= 0:
            return None
        return self.ttft_before.p50 / self.ttft_after.p50


def retime(trace: PreparedTrace, stage: str, speedup: float) -> tuple[list[float], list[float]]:
    """New (start, end) of every span when ``stage`` (and its sub-stages) is ``speedup``
    times faster, the trace's dependencies kept (:func:`tracer.analysis.model.dependencies.retime`).

    Times are nanoseconds relative to the root's start (floats: small numbers keep
    their precision).
    """
    return retime_model(trace_dependencies(trace), factors(trace, Faster(stage, speedup)))


def factors(trace: PreparedTrace, scenario: Scenario) -> list[float]:
    """Each span's time factor under ``scenario`` (by its stage)."""
    return [scenario.factor(x) for x in trace.stage]


def what_if(
    traceset: TraceSet,
    stage: str,
    speedup: float,
    stage_map: StageMap | None = None,
    changes: tuple[Scenario, ...] = (),
) -> WhatIf:
    """Project ``stage`` being ``speedup`` times faster onto every trace, with
    ``changes`` (more calls: :class:`~tracer.analysis.whatif.scenario.Repeat`,
    :class:`~tracer.analysis.whatif.scenario.Fanout`) too.

    Raises:
        ConfigError: ``speedup`` is not positive, or no trace has ``stage``.
        NoUsableDataError: no trace could be analysed.
    """
    return project(
        traceset, Projection(stage, speedup, changes).drawn(traceset, stage_map), stage_map
    )


def project(
    traceset: TraceSet, projection: Projection, stage_map: StageMap | None = None
) -> WhatIf:
    """``projection`` of every trace of ``traceset`` (see :func:`what_if`)."""
    return project_columns(traceset, projection, stage_map)[0]


def project_columns(
    traceset: TraceSet, projection: Projection, stage_map: StageMap | None = None
) -> tuple[WhatIf, Columns]:
    """:func:`project`, and the per-trace rows it summed (each trace's projection)."""
    from tracer.analysis.attribution.attribute import Attributor

    attribute = Attributor("stage", stage_map, projection=projection)
    with gc_paused():
        for seq, (trace_id, spans) in enumerate(traceset.traces.items()):
            attribute(trace_id, spans, seq, 0)
        table = attribute.table
        columns = table.columns()
        return projection.result(columns, traceset.warnings, table.tally()), columns


@dataclass(frozen=True)
class Projection:
    """``stage`` ``speedup`` times faster, applied to one prepared trace at a time (at
    attribution, so that streamed traces need not be kept), then summed by
    :meth:`result`.

    Raises:
        ConfigError: ``speedup`` is not positive.
    """

    stage: str
    speedup: float
    #: more changes at once: a stage's calls (Repeat, Fanout)
    changes: tuple[Scenario, ...] = ()
    #: the run's calls of each stage called in parallel, ns: what the other calls of
    #: best-of-N are drawn from (:func:`~tracer.analysis.whatif.expand.call_times`)
    draws: tuple[tuple[str, tuple[float, ...]], ...] = ()

    def __post_init__(self) -> None:
        Faster(self.stage, self.speedup)  # checked as the scenario checks it
        self.scenario  # noqa: B018 (changes that clash fail here)

    @cached_property
    def scenario(self) -> Scenario:
        """The change this projection retimes the traces with."""
        if not self.changes:
            return Faster(self.stage, self.speedup)
        faster = [Faster(self.stage, self.speedup)] if self.speedup != 1 else []
        return Combined((*faster, *self.changes))

    @property
    def parallel(self) -> bool:
        """Whether a change calls a stage in parallel (its draws come from the run)."""
        return any(c.calls(c.stage).parallel for c in self.changes)

    def drawn(self, traces: TraceSet, stage_map: StageMap | None = None) -> Projection:
        """This projection with the draws of its parallel calls from ``traces`` (itself
        when it has none)."""
        if not self.parallel:
            return self
        found = call_times(traces, self.scenario, stage_map)
        return replace(self, draws=tuple(sorted(found.items())))

    @cached_property
    def _draws(self) -> dict[str, tuple[float, ...]]:
        return dict(self.draws)

    def __call__(self, trace: PreparedTrace) -> Projected:
        """The trace's retimed end-to-end time, TTFT and stage times."""
        stage = self.stage
        factor = factors(trace, self.scenario)
        deps = trace_dependencies(trace)
        whole: Added = {}
        if self.changes:
            new_start, new_end, whole = retime_with_calls(
                trace, deps, factor, self.scenario, self._draws
            )
        else:
            new_start, new_end = retime_model(deps, factor)
        before: dict[str, int] = {}
        after: dict[str, float] = {}
        for i, t in critical_times(deps).items():
            key = group_key(trace, i, "stage")
            before[key] = before.get(key, 0) + t
        # The critical path of the retimed trace, through the same dependencies.
        for i, u in critical_times(deps, new_start, new_end).items():
            key = group_key(trace, i, "stage")
            after[key] = after.get(key, 0.0) + u
        ttft = _retimed_ttft(trace, factor, whole)
        return Projected(
            after_ns=new_end[trace.root] - new_start[trace.root],
            ttft_before_ns=None if ttft is None else ttft[0],
            ttft_after_ns=None if ttft is None else ttft[1],
            has_stage=any(covers(stage, x) for x in trace.stage),
            before_groups=before,
            after_groups=after,
        )

    def result(
        self,
        columns: Columns,
        loaded: Warnings,
        tally: Warnings,
        exact_traces: int | None = None,
    ) -> WhatIf:
        """The projection over every row of ``columns`` (attributed with this
        projection); ``loaded`` are the loaders' warnings, ``tally`` the traces'.
        Percentiles are exact up to ``exact_traces`` traces, then sketched
        (:func:`~tracer.analysis.analyze`).

        Raises:
            ConfigError: no trace has the stage.
            NoUsableDataError: no rows.
            ValueError: ``columns`` have no projection.
        """
        if not len(columns):
            raise NoUsableDataError(
                "no trace could be analysed: " + "; ".join(tally.messages or ["no spans"])
            )
        p = columns.projected
        if p is None:
            raise ValueError("the columns were attributed without a what-if projection")
        warnings = Warnings()
        warnings.merge(loaded)
        warnings.merge(tally)
        limit = exact_limit(exact_traces)
        sketched = len(columns) > limit
        if sketched:
            warnings.note(sketch_note(limit))
        names = columns.group_names
        w = columns.weight  # sampled traces: estimates of the traffic (docs/sampling.md)
        before_groups = _sums(p.before_groups, names, w)
        if not p.has_stage.any():
            raise ConfigError(
                f"no span is in stage {self.stage!r}; the stages in these traces are: "
                + ", ".join(sorted(before_groups))
            )
        for change in self.changes:
            if not any(covers(change.stage, k) for k in before_groups):
                warnings.note(
                    f"no span on the critical path is in stage {change.stage!r}: "
                    f"{change.describe()} changes nothing there"
                )
        after_groups = _sums(p.after_groups, names, w)
        b = stats(columns.e2e_ns / NS_PER_MS, sketched, w)
        a = stats(p.after_ns / NS_PER_MS, sketched, w)
        realized = {
            key: (getattr(b, key) / getattr(a, key)) if getattr(a, key) > 0 else float("inf")
            for key in ("mean", "p50", "p90", "p99")
        }
        total_before = sum(before_groups.values()) or 1.0
        total_after = sum(after_groups.values()) or 1.0
        first = p.ttft_before_ns != _NONE
        return WhatIf(
            change=self.scenario.describe(),
            calls=tuple(
                (c.stage, c.calls(c.stage).n, c.calls(c.stage).parallel) for c in self.changes
            ),
            stage=self.stage,
            speedup=float(self.speedup),
            traces=len(columns),
            before=b,
            after=a,
            realized=realized,
            before_groups=_shares(before_groups, total_before),
            after_groups=_shares(after_groups, total_after),
            stage_share=sum(v for k, v in before_groups.items() if covers(self.stage, k))
            / total_before,
            skipped_traces=warnings.skipped_traces,
            messages=tuple(warnings.messages),
            ttft_before=stats(
                p.ttft_before_ns[first] / NS_PER_MS, sketched, None if w is None else w[first]
            )
            if first.any()
            else None,
            ttft_after=stats(
                p.ttft_after_ns[first] / NS_PER_MS, sketched, None if w is None else w[first]
            )
            if first.any()
            else None,
        )


def _sums(
    flat: tuple[np.ndarray, np.ndarray, np.ndarray], names: list[str], w: np.ndarray | None
) -> dict[str, float]:
    """Each group's total over the rows (ints summed exactly, then as floats), each row
    times its weight when the traces are a sample."""
    rows, keys, values = flat
    if w is not None:
        values = values * w[rows]
    return {names[k]: float(values[keys == k].sum()) for k in np.unique(keys).tolist()}


def _retimed_ttft(
    trace: PreparedTrace, factor: list[float], whole: Added
) -> tuple[int, float] | None:
    """The client's time to first token before and after the change, or None.

    The TTFT view of the trace (spans end at their first-token marks, spans after the
    point are left out) is retimed like the whole trace; its root's new length is the
    new time to first token, after the calls made more than once (``whole``: the first
    token comes after the calls before it, or after the slowest of parallel ones).
    """
    point = client_first_token(trace)
    root = trace.root
    if point is None or point <= trace.start[root]:
        return None
    point = min(point, trace.end[root])
    ends, included = ttft_view(trace, point)
    view = trace_dependencies(trace, ends, included)
    new_start, new_end = retime_model(view, factor, ttft_extra_ns(view, factor, whole, included))
    return point - trace.start[root], new_end[root] - new_start[root]


def _shares(groups: dict[str, float], total: float) -> tuple[tuple[str, float], ...]:
    rows = [(name, float(v / total)) for name, v in groups.items()]
    rows.sort(key=lambda r: (-r[1], r[0]))
    return tuple(rows)


def with_load(w: WhatIf, projected: LoadWhatIf, reason: str) -> WhatIf:
    """``w`` with its end-to-end and TTFT figures after the change from the load model."""
    realized = {
        key: (getattr(w.before, key) / getattr(projected.after, key))
        if getattr(projected.after, key) > 0
        else float("inf")
        for key in ("mean", "p50", "p90", "p99")
    }
    return replace(
        w,
        after=projected.after,
        realized=realized,
        ttft_after=projected.ttft_after if projected.ttft_after is not None else w.ttft_after,
        model="load",
        model_reason=reason,
        load=projected,
    )


def ideal_speedup(stage_share: float, speedup: float) -> float:
    """Amdahl's law: the end-to-end speedup of the mean when a stage holding
    ``stage_share`` of the time (summed over the traces) gets ``speedup`` times faster
    and nothing else changes. Not a ceiling on a percentile, nor under load."""
    return float(1.0 / ((1.0 - stage_share) + stage_share / speedup))
