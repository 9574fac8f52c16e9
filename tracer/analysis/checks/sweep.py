"""Judging a bench sweep: goodput and SLO attainment per level, the highest level that
meets the SLO, and the knee (``docs/bench.md`` has the rules and their sources).

Goodput (``hoptrace bench --slo``) is the number of requests per second, over a
level's measured wall time, that succeeded and met every limit of the SLO, as vLLM's
benchmark reports it (``--goodput``, after DistServe). SLO attainment is the fraction
of the level's measured requests that did (a failed request misses). The SLO is met
at a level when its attainment is at least the target (``--slo-attainment``, 90%);
the highest such level is DistServe's own goodput (the highest load at which the
attainment reaches the target), counted in clients instead of requests per second.

The knee is the first level at which the clients added since the level below each
bought less than :data:`FLAT_SHARE` of the requests/s one client got at the lowest
level, while its end-to-end P50 or P90 had grown :data:`LATENCY_GROWTH` times or more
over the lowest level's: from there more clients add waiting, not throughput. In a
closed loop the two go together (requests/s is about clients over latency); asking for
both keeps a noisy level from being called the knee.

An open-loop sweep (``bench --rate``) sets the rate, not the clients: its knee is the
first rate that throughput stopped following: its answers, from the first to the last,
came at less than :data:`FOLLOW_SHARE` of the rate its requests were sent at, while the
latency from the intended send time in the level's second half grew to
:data:`LATENCY_GROWTH` times the first half's (the queue grew through the level;
asking for both keeps the draw of a short Poisson level from being called the knee).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tracer._errors import ConfigError, NoUsableDataError
from tracer.analysis.aggregate import Stats
from tracer.analysis.checks.slo import Slo

__all__ = [
    "DEFAULT_ATTAINMENT",
    "FLAT_SHARE",
    "FOLLOW_SHARE",
    "LATENCY_GROWTH",
    "Knee",
    "LevelSlo",
    "RateKnee",
    "SweepSlo",
    "check_slo",
    "find_knee",
    "find_rate_knee",
    "judge_slo",
    "level_slo",
    "request_ms",
    "stage_growth",
]

#: The SLO attainment a level needs to meet the SLO (``--slo-attainment``).
DEFAULT_ATTAINMENT = 0.9
#: A level flattens when each client added since the level below bought less than this
#: share of the requests/s per client of the lowest level (1.0 is perfect scaling).
FLAT_SHARE = 0.25
#: ... and it is the knee when its end-to-end P50 or P90 is at least this many times
#: the lowest level's.
LATENCY_GROWTH = 1.5
#: An open loop's level keeps up while it answers at least this share of its rate.
FOLLOW_SHARE = 0.9
#: The metrics only a stream measures.
_STREAM_METRICS = ("ttft", "tpot", "itl")


class _Sample(Protocol):
    @property
    def ok(self) -> bool: ...

    e2e_ms: float
    ttfc_ms: float | None
    gaps_ms: tuple[float, ...]
    output_tokens: int


class _Level(Protocol):
    concurrency: int
    samples: list  # of samples
    wall_s: float

    @property
    def ok(self) -> list: ...

    def e2e(self) -> Stats: ...

    def requests_per_s(self) -> float: ...


def request_ms(sample: _Sample, metric: str) -> float | None:
    """One successful request's value of an SLO metric, in ms (None: not measured).

    ``tpot`` is (e2e - ttft) / (output tokens - 1), 0 for a one-token answer; ``itl``
    is the mean gap between the request's content chunks, 0 with a single chunk.
    """
    if metric == "e2e":
        return sample.e2e_ms
    if sample.ttfc_ms is None:
        return None
    if metric == "ttft":
        return sample.ttfc_ms
    if metric == "tpot":
        tokens = sample.output_tokens
        return (sample.e2e_ms - sample.ttfc_ms) / (tokens - 1) if tokens > 1 else 0.0
    if metric == "itl":
        gaps = sample.gaps_ms
        return sum(gaps) / len(gaps) if gaps else 0.0
    raise ValueError(f"metric must be one of e2e, ttft, tpot, itl, got {metric!r}")


def _meets(sample: _Sample, metric: str, limit_ms: float) -> bool:
    value = request_ms(sample, metric) if sample.ok else None
    return value is not None and value <= limit_ms


@dataclass(frozen=True, slots=True)
class LevelSlo:
    """One level judged against the SLO."""

    concurrency: int
    requests: int
    meeting: int
    goodput_per_s: float
    #: Per metric, the fraction of the level's requests within its limit.
    attainment_by_metric: tuple[tuple[str, float], ...]

    @property
    def attainment(self) -> float:
        """The fraction of the level's requests that succeeded and met every limit."""
        return self.meeting / self.requests if self.requests else 0.0


@dataclass(frozen=True, slots=True)
class SweepSlo:
    """A sweep judged against the SLO."""

    slo: Slo
    attainment_target: float
    levels: tuple[LevelSlo, ...]

    @property
    def max_concurrency(self) -> int | None:
        """The highest level whose attainment reaches the target; None if none does."""
        met = [lv.concurrency for lv in self.levels if lv.attainment >= self.attainment_target]
        return max(met) if met else None


def level_slo(level: _Level, slo: Slo) -> LevelSlo:
    """Goodput and attainment of one level."""
    samples = level.samples
    n = len(samples)
    by_metric = []
    meeting = [True] * n
    for metric, limit_ms in slo.limits_ms:
        ok = [_meets(s, metric, limit_ms) for s in samples]
        by_metric.append((metric, sum(ok) / n if n else 0.0))
        meeting = [a and b for a, b in zip(meeting, ok, strict=True)]
    met = sum(meeting)
    goodput = met / level.wall_s if level.wall_s > 0 else 0.0
    return LevelSlo(level.concurrency, n, met, goodput, tuple(by_metric))


def judge_slo(
    levels: Sequence[_Level], slo: Slo, attainment_target: float = DEFAULT_ATTAINMENT
) -> SweepSlo:
    """Every level judged against ``slo``, in concurrency order."""
    ordered = sorted(levels, key=lambda lv: lv.concurrency)
    return SweepSlo(slo, attainment_target, tuple(level_slo(lv, slo) for lv in ordered))


def check_slo(slo: Slo | None, stream: bool, attainment_target: float) -> None:
    """Raise ConfigError for an SLO the bench cannot judge or a bad target."""
    if not 0 < attainment_target <= 1:
        raise ConfigError(
            f"--slo-attainment must be a fraction in (0, 1], e.g. 0.9, got {attainment_target!r}"
        )
    if slo is None or stream:
        return
    streamed = [m for m in slo.metrics if m in _STREAM_METRICS]
    if streamed:
        raise ConfigError(
            f"--slo {', '.join(streamed)} is measured on streams only: drop --no-stream "
            "or limit e2e alone"
        )


@dataclass(frozen=True, slots=True)
class Knee:
    """The first level where added clients bought little throughput and latency grew."""

    concurrency: int
    p90_ratio: float
    stage: str | None
    stage_growth_ms: float | None = None
    #: The level below it, the last one that still scaled.
    from_concurrency: int | None = None
    p50_ratio: float | None = None
    #: Requests/s each client added since ``from_concurrency`` bought, as a share of
    #: the requests/s per client at the lowest level (1.0: perfect scaling).
    marginal_share: float | None = None


def find_knee(levels: Sequence[_Level]) -> Knee | None:
    """The knee of a sweep (see the module docstring), or None.

    Levels without a successful request are left out.
    """
    measured = sorted((lv for lv in levels if lv.ok), key=lambda lv: lv.concurrency)
    if len(measured) < 2:
        return None
    base = measured[0]
    base_e2e = base.e2e()
    per_client = base.requests_per_s() / base.concurrency
    if per_client <= 0 or base_e2e.p50 <= 0 or base_e2e.p90 <= 0:
        return None
    for below, lv in zip(measured, measured[1:], strict=False):
        gain = (lv.requests_per_s() - below.requests_per_s()) / (lv.concurrency - below.concurrency)
        share = gain / per_client
        e2e = lv.e2e()
        p50_ratio, p90_ratio = e2e.p50 / base_e2e.p50, e2e.p90 / base_e2e.p90
        if share < FLAT_SHARE and max(p50_ratio, p90_ratio) >= LATENCY_GROWTH:
            return Knee(
                lv.concurrency,
                p90_ratio,
                None,
                from_concurrency=below.concurrency,
                p50_ratio=p50_ratio,
                marginal_share=share,
            )
    return None


@dataclass(frozen=True, slots=True)
class RateKnee:
    """The first rate of an open-loop sweep that throughput stopped following."""

    rate_per_s: float
    requests_per_s: float
    #: the rate below it, the last one answered in full (None: the lowest rate)
    from_rate_per_s: float | None


def find_rate_knee(levels: Sequence[Any]) -> RateKnee | None:
    """The knee of an open-loop sweep (levels with ``rate_per_s``; the module
    docstring), or None when every rate was followed."""
    below = None
    for lv in sorted((lv for lv in levels if lv.rate_per_s), key=lambda lv: lv.rate_per_s):
        behind = lv.answer_rate() < FOLLOW_SHARE * lv.sent_rate()
        if behind and lv.latency_growth() >= LATENCY_GROWTH:
            return RateKnee(lv.rate_per_s, lv.answer_rate(), below)
        below = lv.rate_per_s
    return None


def stage_growth(traces: Any, base_ids: set[str], knee_ids: set[str]) -> tuple[str, float] | None:
    """The stage whose mean time grew most from ``base_ids`` to ``knee_ids`` traces.

    ``traces`` is a :class:`~tracer.analysis.TraceSet`; None when either side has no
    usable trace.
    """
    from tracer.analysis.aggregate import analyze

    def means(ids: set[str]) -> dict[str, float] | None:
        subset = traces.subset(ids)
        if not subset.traces:
            return None
        try:
            return {g.name: g.mean_ms for g in analyze(subset, "stage").groups}
        except NoUsableDataError:
            return None

    before, after = means(base_ids), means(knee_ids)
    if before is None or after is None:
        return None
    growth = {g: after.get(g, 0.0) - before.get(g, 0.0) for g in set(before) | set(after)}
    stage = max(growth, key=lambda g: (growth[g], g))
    return stage, growth[stage]
