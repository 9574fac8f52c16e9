"""The figures an analysis reports: per-sample summaries, groups, hops, tokens, and
what a sample of the traffic stands for. Plain frozen dataclasses, shared by the
aggregation (:mod:`tracer.analysis.aggregate`) and the renderers."""

from __future__ import annotations

from dataclasses import dataclass

from tracer.analysis.sampling.estimate import Interval

__all__ = ["GroupStats", "HopStats", "Sample", "Stats", "TokenStats"]


@dataclass(frozen=True, slots=True)
class Stats:
    """Summary of a sample in milliseconds; percentiles interpolate linearly. From
    weighted traces (a sample of the traffic), the mean and percentiles estimate the
    whole traffic's and ``intervals`` holds their confidence intervals (``mean``,
    ``p50``, ``p90``, ``p99``); min and max are the sample's."""

    n: int
    mean: float
    p50: float
    p90: float
    p99: float
    min: float
    max: float
    intervals: dict[str, Interval] | None = None


@dataclass(frozen=True, slots=True)
class GroupStats:
    """One group's share of the time and its per-trace distribution (ms)."""

    name: str
    share: float
    tail_share: float
    ttft_share: float | None
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    #: From weighted traces: the intervals of ``share``, ``tail_share``, ``ttft_share``,
    #: ``mean_ms``, ``p50_ms``, ``p90_ms`` and ``p99_ms``.
    intervals: dict[str, Interval] | None = None


@dataclass(frozen=True, slots=True)
class HopStats:
    """Network time of one hop ``from -> to`` over the traces that have it (ms); ``n``
    counts the traces analysed (kept, when sampled)."""

    source: str
    target: str
    n: int
    mean_ms: float
    p50_ms: float
    p90_ms: float
    #: From weighted traces: the intervals of ``mean_ms``, ``p50_ms`` and ``p90_ms``.
    intervals: dict[str, Interval] | None = None


@dataclass(frozen=True, slots=True)
class Sample:
    """What the analysed traces stand for, when they are a sample (some weight is not
    1, or some cannot be known): the estimated traces of the traffic with their
    interval and rate, and the traces whose weight cannot be known (counted once)."""

    kept: int
    estimated_traces: float
    interval: Interval
    rate_per_s: float | None
    rate_interval: Interval | None
    unknown_weight: int


@dataclass(frozen=True, slots=True)
class TokenStats:
    """Tokens per request over the traces whose inference spans carry usage."""

    requests: int
    input_mean: float
    output_mean: float
    models: tuple[str, ...]
    input_total: int
    output_total: int
    #: From weighted traces: the intervals of ``input_mean`` and ``output_mean`` (the
    #: totals then estimate the traffic's).
    intervals: dict[str, Interval] | None = None
