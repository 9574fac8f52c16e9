"""The last minutes of attributed traces, summed per route or model: what
``GET /live`` answers and ``hoptrace top`` shows.

Each attributed trace is kept (its labels, end-to-end time, TTFT, stage times, output
tokens, whether it failed, and its weight: what a sampled trace stands for) for
:data:`KEEP_S` seconds, at most :data:`MAX_TRACES` of them (the oldest go first), so
the window's memory is bounded whatever the rate. The figures are of all the traffic:
a trace counts ``weight`` times in the shares, percentiles, token rate and error rate.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

from collector.metrics import LABELS, Labels

__all__ = ["BY", "KEEP_S", "MAX_TRACES", "Window"]

#: The longest window asked for, seconds.
KEEP_S = 300.0
MAX_TRACES = 100_000
#: What a summary can be grouped by.
BY = LABELS


class _Record(NamedTuple):
    at_s: float
    labels: Labels
    e2e_s: float
    ttft_s: float | None
    stages: dict[str, float]
    output_tokens: int
    error: bool
    weight: float


def _quantile(values: list[tuple[float, float]], q: float) -> float | None:
    """The ``q`` quantile of (value, weight) pairs sorted by value, linear between
    closest ranks, each value taken ``weight`` times (so with weights of 1, the plain
    quantile); None for no values."""
    if not values:
        return None
    total = sum(w for _, w in values)
    pos = q * max(total - 1.0, 0.0)
    lo = math.floor(pos)
    low, high = _at(values, lo), _at(values, min(lo + 1.0, max(total - 1.0, 0.0)))
    return low + (high - low) * (pos - lo)


def _at(values: list[tuple[float, float]], rank: float) -> float:
    """The value at ``rank`` (from 0) of the values each repeated ``weight`` times."""
    seen = 0.0
    for value, weight in values:
        seen += weight
        if rank < seen:
            return value
    return values[-1][0]


class Window:
    """A :class:`~tracer.analysis.live.attribution.Sink` keeping recent traces for summaries."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, max_traces: int = MAX_TRACES
    ) -> None:
        self._clock = clock
        self._records: deque[_Record] = deque(maxlen=max_traces)

    def record(
        self,
        labels: Labels,
        e2e_s: float,
        ttft_s: float | None,
        stages: dict[str, float],
        tokens: tuple[int, int],
        error: bool,
        weight: float = 1.0,
    ) -> None:
        now = self._clock()
        self._records.append(_Record(now, labels, e2e_s, ttft_s, stages, tokens[1], error, weight))
        while self._records and self._records[0].at_s < now - KEEP_S:
            self._records.popleft()

    def summary(self, by: str = "route", window_s: float = 60.0) -> dict[str, Any]:
        """Per value of label ``by`` over the last ``window_s`` seconds: traces (and the
        traces they stand for, ``estimated_traces``), stage shares, P50/P90 end-to-end
        and TTFT (ms), output tokens/s and the error rate, each trace counted by its
        weight.

        Raises:
            ValueError: ``by`` is not a label, or ``window_s`` is out of 1..KEEP_S.
        """
        if by not in BY:
            raise ValueError(f"by must be one of {', '.join(BY)}, got {by!r}")
        if not 1 <= window_s <= KEEP_S:
            raise ValueError(f"window must be 1..{KEEP_S:g} seconds, got {window_s!r}")
        now = self._clock()
        since = now - window_s
        at = BY.index(by)
        groups: dict[str, list[_Record]] = {}
        for record in self._records:
            if record.at_s >= since:
                groups.setdefault(record.labels[at], []).append(record)
        rows: list[dict[str, Any]] = []
        for value, records in groups.items():
            e2e = sorted((r.e2e_s, r.weight) for r in records)
            ttft = sorted((r.ttft_s, r.weight) for r in records if r.ttft_s is not None)
            total = sum(v * w for v, w in e2e)
            weight = sum(r.weight for r in records)
            stages: dict[str, float] = {}
            for r in records:
                for stage, seconds in r.stages.items():
                    stages[stage] = stages.get(stage, 0.0) + seconds * r.weight
            shares = {s: t / total for s, t in stages.items()} if total > 0 else {}
            rows.append(
                {
                    by: value,
                    "traces": len(records),
                    "estimated_traces": weight,
                    "shares": dict(sorted(shares.items(), key=lambda kv: -kv[1])),
                    "e2e_p50_ms": _ms(_quantile(e2e, 0.5)),
                    "e2e_p90_ms": _ms(_quantile(e2e, 0.9)),
                    "ttft_p50_ms": _ms(_quantile(ttft, 0.5)),
                    "ttft_p90_ms": _ms(_quantile(ttft, 0.9)),
                    "output_tokens_per_s": sum(r.output_tokens * r.weight for r in records)
                    / window_s,
                    "error_rate": sum(r.weight for r in records if r.error) / weight,
                }
            )
        rows.sort(key=lambda row: (-row["traces"], str(row[by])))
        return {
            "by": by,
            "window_s": window_s,
            "traces": sum(r["traces"] for r in rows),
            "estimated_traces": sum(r["estimated_traces"] for r in rows),
            "rows": rows,
        }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0
