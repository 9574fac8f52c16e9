"""The aggregation's weighted figures: what a sample of traces says of the traffic,
each with its interval (:mod:`tracer.analysis.sampling.estimate`, docs/sampling.md)."""

from __future__ import annotations

import numpy as np

from tracer.analysis.sampling.estimate import quantiles, ratio
from tracer.analysis.sampling.estimate import total as estimated_total
from tracer.analysis.table._columns import Columns
from tracer.analysis.table.figures import GroupStats, Sample
from tracer.spans.model import Warnings

__all__ = ["sample_of", "weighted_group"]


def sample_of(cols: Columns, warnings: Warnings) -> Sample:
    """What the rows stand for (:class:`Sample`); notes the traces whose weight cannot
    be known."""
    n = len(cols)
    w = cols.weight if cols.weight is not None else np.ones(n)
    unknown = 0 if cols.weight_unknown is None else int(cols.weight_unknown.sum())
    if unknown:
        warnings.note(
            f"{unknown} of {n} traces were sampled with no known probability (tail-sampled, "
            "or their spans disagree on the sampling threshold); each counts once"
        )
    est, interval = estimated_total(w)
    seconds = (int(cols.start_ns.max()) - int(cols.start_ns.min())) / 1e9 if n > 1 else 0.0
    return Sample(
        kept=n,
        estimated_traces=est,
        interval=interval,
        rate_per_s=est / seconds if seconds > 0 else None,
        rate_interval=interval.scaled(1 / seconds) if seconds > 0 else None,
        unknown_weight=unknown,
    )


def weighted_group(
    name: str,
    column_ms: np.ndarray,
    e2e_ms: np.ndarray,
    tail: np.ndarray,
    ttft: float | tuple[np.ndarray, np.ndarray] | None,
    w: np.ndarray,
) -> GroupStats:
    """One group's estimates from weighted traces (see ``aggregate._group_stats``)."""
    share, share_iv = ratio(w, column_ms, e2e_ms)
    tail_share, tail_iv = ratio(w[tail], column_ms[tail], e2e_ms[tail])
    mean, mean_iv = ratio(w, column_ms)
    (p50, i50), (p90, i90), (p99, i99) = quantiles(column_ms, w, [50, 90, 99])
    intervals = {
        "share": share_iv,
        "tail_share": tail_iv,
        "mean_ms": mean_iv,
        "p50_ms": i50,
        "p90_ms": i90,
        "p99_ms": i99,
    }
    ttft_share = None
    if isinstance(ttft, tuple):
        ttft_share, intervals["ttft_share"] = ratio(w, ttft[0], ttft[1])
    return GroupStats(name, share, tail_share, ttft_share, mean, p50, p90, p99, intervals)
