"""Service level objectives: which requests meet them, and where the rest lose them.

An SLO is a limit per request on one or more latency metrics, all of which a request
must meet (``docs/bench.md``, goodput)::

    slo = parse_slo("ttft=200ms,e2e=2s")
    slo.limits_ms  # (("ttft", 200.0), ("e2e", 2000.0))

Metrics: ``ttft`` (time to the first content chunk), ``e2e`` (end to end), ``tpot``
(time per output token after the first: (e2e - ttft) / (output tokens - 1)) and
``itl`` (the request's mean gap between content chunks). ``hoptrace bench`` measures
all four; a trace set gives ``ttft`` and ``e2e``.

Over traces (``hoptrace analyze --slo``), :func:`slo_analysis` gives the attainment
and, per stage (or service, operation), the mean time in the traces that miss minus
the mean in those that meet: where the SLO is lost.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from tracer._errors import ConfigError
from tracer.analysis.sampling.estimate import Interval, ratio, total
from tracer.analysis.table._columns import Columns

__all__ = [
    "METRICS",
    "TRACE_METRICS",
    "GroupLoss",
    "Slo",
    "SloAnalysis",
    "parse_slo",
    "slo_analysis",
]

#: Every metric an SLO may limit, in the order they are reported.
METRICS = ("ttft", "tpot", "itl", "e2e")
#: The metrics a trace set gives.
TRACE_METRICS = ("ttft", "e2e")
_NS_PER_MS = 1e6
_LIMIT = re.compile(r"(?P<value>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(?P<unit>ms|s)")
_UNIT_MS = {"ms": 1.0, "s": 1000.0}


@dataclass(frozen=True, slots=True)
class Slo:
    """Limits per request, in ms, all of which a request must meet (``<=``)."""

    limits_ms: tuple[tuple[str, float], ...]

    def limit_ms(self, metric: str) -> float | None:
        """The limit on ``metric``, or None when the SLO does not limit it."""
        return dict(self.limits_ms).get(metric)

    @property
    def metrics(self) -> tuple[str, ...]:
        """The limited metrics, in :data:`METRICS` order."""
        return tuple(m for m, _ in self.limits_ms)

    def describe(self) -> str:
        """``ttft <= 200 ms, e2e <= 2,000 ms``."""
        return ", ".join(f"{m} <= {v:,.6g} ms" for m, v in self.limits_ms)

    def as_dict(self) -> dict[str, float]:
        """``{"ttft_ms": 200.0, ...}``."""
        return {f"{m}_ms": v for m, v in self.limits_ms}


def parse_slo(text: str, option: str = "--slo", metrics: tuple[str, ...] = METRICS) -> Slo:
    """``METRIC=LIMIT[,METRIC=LIMIT]`` with limits in ``ms`` or ``s`` (``ttft=200ms,e2e=2s``).

    Args:
        text: the option's value.
        option: the option's name, for the messages.
        metrics: the metrics this command can judge.

    Raises:
        ConfigError: an empty list, an unknown metric or one this command cannot judge,
            a metric given twice, a limit without a unit or that is not positive.
    """
    found: dict[str, float] = {}
    parts = [part.strip() for part in text.split(",")]
    if not any(parts):
        raise ConfigError(f"{option} must be METRIC=LIMIT[,METRIC=LIMIT], e.g. ttft=200ms,e2e=2s")
    for part in parts:
        metric, sep, raw = (p.strip() for p in part.partition("="))
        metric = metric.lower()
        if not sep or not metric or not raw:
            raise ConfigError(
                f"{option} must be METRIC=LIMIT[,METRIC=LIMIT] (e.g. ttft=200ms,e2e=2s), "
                f"got {part!r}"
            )
        if metric not in metrics:
            known = ", ".join(metrics)
            why = "" if metric not in METRICS else " here"
            raise ConfigError(f"{option}: {metric!r} is not a metric{why}; use one of {known}")
        if metric in found:
            raise ConfigError(f"{option}: {metric!r} is given twice")
        match = _LIMIT.fullmatch(raw.lower())
        if match is None:
            raise ConfigError(
                f"{option}: the limit of {metric} must be a number with a unit, ms or s "
                f"(200ms, 2s), got {raw!r}"
            )
        limit_ms = float(match["value"]) * _UNIT_MS[match["unit"]]
        if not math.isfinite(limit_ms) or limit_ms <= 0:
            raise ConfigError(f"{option}: the limit of {metric} must be positive, got {raw!r}")
        found[metric] = limit_ms
    return Slo(tuple((m, found[m]) for m in METRICS if m in found))


@dataclass(frozen=True, slots=True)
class GroupLoss:
    """One group's mean time in the traces that miss the SLO and in those that meet it."""

    name: str
    missing_mean_ms: float
    meeting_mean_ms: float

    @property
    def extra_ms(self) -> float:
        """How much more time the group took in a missing trace (mean) than in a
        meeting one: negative when it took less."""
        return self.missing_mean_ms - self.meeting_mean_ms


@dataclass(frozen=True, slots=True)
class SloAnalysis:
    """SLO attainment over traces, and where the missing ones lose the time."""

    slo: Slo
    group_by: str
    traces: int
    meeting: int
    #: Per metric, the fraction of traces within its limit.
    attainment_by_metric: tuple[tuple[str, float], ...]
    #: Traces without a time to first token: they count as missing a ttft limit.
    without_ttft: int
    #: By ``extra_ms``, largest first; empty when no trace misses or none meets.
    losses: tuple[GroupLoss, ...]
    #: From sampled (weighted) traces: the estimated attainment of the whole traffic
    #: and its confidence interval (``traces`` and ``meeting`` count the sample).
    estimate: tuple[float, Interval] | None = None
    #: From sampled traces: the traffic's requests a second that meet the SLO (its
    #: goodput) over the time the sample spans, with its interval; None for one instant.
    goodput_per_s: tuple[float, Interval] | None = None

    @property
    def missing(self) -> int:
        """Traces that miss at least one limit."""
        return self.traces - self.meeting

    @property
    def attainment(self) -> float:
        """The fraction of traces that meet every limit (of the traffic, estimated,
        when the traces are a sample)."""
        if self.estimate is not None:
            return self.estimate[0]
        return self.meeting / self.traces if self.traces else 0.0


def slo_analysis(cols: Columns, slo: Slo, group_by: str = "stage") -> SloAnalysis:
    """Judge every trace of ``cols`` (an :class:`~tracer.analysis.aggregate.Analysis`'s
    columns) against ``slo``, and compare the groups' times in missing and meeting traces.

    Raises:
        ConfigError: ``slo`` limits a metric traces do not give (``tpot``, ``itl``).
    """
    unknown = [m for m in slo.metrics if m not in TRACE_METRICS]
    if unknown:
        raise ConfigError(
            f"--slo: traces give {' and '.join(TRACE_METRICS)}, not {', '.join(unknown)}"
        )
    n = len(cols)
    w = cols.weight  # None: full data
    meets = np.ones(n, bool)
    by_metric = []
    has_ttft = cols.ttft_ns >= 0
    for metric, limit_ms in slo.limits_ms:
        if metric == "e2e":
            ok = cols.e2e_ns <= limit_ms * _NS_PER_MS
        else:
            ok = has_ttft & (cols.ttft_ns <= limit_ms * _NS_PER_MS)
        share = float(ok.mean()) if w is None else ratio(w, ok.astype(float))[0]
        by_metric.append((metric, share if n else 0.0))
        meets &= ok
    without_ttft = int((~has_ttft).sum()) if "ttft" in slo.metrics else 0
    meeting = int(meets.sum())
    losses: list[GroupLoss] = []
    if 0 < meeting < n:
        rows, keys, values = cols.groups
        per_group = np.zeros((len(cols.group_names), n))
        np.add.at(per_group, (keys, rows), values.astype(float) / _NS_PER_MS)
        for k in sorted(set(np.unique(keys).tolist()), key=lambda k: cols.group_names[k]):
            if w is None:
                missing, meeting_mean = per_group[k, ~meets].mean(), per_group[k, meets].mean()
            else:
                missing = ratio(w[~meets], per_group[k, ~meets])[0]
                meeting_mean = ratio(w[meets], per_group[k, meets])[0]
            losses.append(GroupLoss(cols.group_names[k], float(missing), float(meeting_mean)))
        losses.sort(key=lambda g: (-g.extra_ms, g.name))
    estimate = goodput = None
    if w is not None and n:
        estimate = ratio(w, meets.astype(float))
        seconds = (int(cols.start_ns.max()) - int(cols.start_ns.min())) / 1e9
        if seconds > 0:
            met, interval = total(w, meets.astype(float))
            goodput = (met / seconds, interval.scaled(1 / seconds))
    return SloAnalysis(
        slo, group_by, n, meeting, tuple(by_metric), without_ttft, tuple(losses), estimate, goodput
    )
