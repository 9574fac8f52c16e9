"""What-if: "stage X becomes k times faster" (SPEC.md section 6).

Every trace is retimed with its dependencies kept: the own time of spans in stage X is
divided by k, everything else keeps its length. A child keeps its start offset from
its anchor (the latest-ending earlier sibling that ended at or before its start, else
its parent's start); that offset is the parent's own time, so it shrinks only when the
parent is in X. A span ends its own trailing time after its children's new ends. On a
sequential chain this is Amdahl's law on the critical path; with parallel work a
sibling that was hidden can become critical.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from tracer._errors import ConfigError, NoUsableDataError
from tracer.analysis.aggregate import NS_PER_MS, Stats, _IssueTally, iter_prepared, stats
from tracer.analysis.breakdown import group_key
from tracer.analysis.critical_path import own_times
from tracer.analysis.prepare import PreparedTrace, StageMap
from tracer.analysis.traceset import TraceSet

__all__ = ["WhatIf", "ideal_speedup", "retime", "what_if"]


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


def retime(trace: PreparedTrace, stage: str, speedup: float) -> tuple[list[float], list[float]]:
    """New (start, end) of every span when ``stage`` is ``speedup`` x faster.

    Times are nanoseconds relative to the root's start (floats: small numbers keep
    their precision).
    """
    n = len(trace.spans)
    factor = [1.0 / speedup if trace.stage[i] == stage else 1.0 for i in range(n)]
    lo = [0] * n
    hi = [0] * n
    root = trace.root
    base = trace.start[root]
    lo[root], hi[root] = 0, trace.end[root] - base
    for p in trace.order:  # clip children to their parent's (clipped) interval
        for c in trace.children[p]:
            cs = min(max(trace.start[c] - base, lo[p]), hi[p])
            lo[c] = cs
            hi[c] = max(min(trace.end[c] - base, hi[p]), cs)
    new_start = [0.0] * n
    new_end = [0.0] * n

    def place(p: int) -> None:
        kids = sorted(trace.children[p], key=lambda c: (lo[c], hi[c]))
        f = factor[p]
        placed: list[int] = []
        for c in kids:
            anchor = -1
            for s in placed:
                if hi[s] <= lo[c] and (anchor < 0 or hi[s] > hi[anchor]):
                    anchor = s
            if anchor >= 0:
                new_start[c] = new_end[anchor] + (lo[c] - hi[anchor]) * f
            else:
                new_start[c] = new_start[p] + (lo[c] - lo[p]) * f
            place(c)
            placed.append(c)
        if kids:
            last = max(hi[c] for c in kids)
            new_end[p] = max(new_end[c] for c in kids) + (hi[p] - last) * f
        else:
            new_end[p] = new_start[p] + (hi[p] - lo[p]) * f

    new_start[root] = float(lo[root])
    place(root)
    return new_start, new_end


def what_if(
    traceset: TraceSet, stage: str, speedup: float, stage_map: StageMap | None = None
) -> WhatIf:
    """Project ``stage`` being ``speedup`` times faster onto every trace.

    Raises:
        ConfigError: ``speedup`` is not positive, or no trace has ``stage``.
        NoUsableDataError: no trace could be analysed.
    """
    if not speedup > 0:
        raise ConfigError(f"speedup must be a positive number, got {speedup!r}")
    tally = _IssueTally()
    before: list[float] = []
    after: list[float] = []
    before_groups: dict[str, float] = {}
    after_groups: dict[str, float] = {}
    seen_stage = False
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))
    try:
        for trace in iter_prepared(traceset, tally, stage_map):
            seen_stage = seen_stage or stage in trace.stage
            new_start, new_end = retime(trace, stage, speedup)
            before.append(trace.e2e_ns / NS_PER_MS)
            after.append((new_end[trace.root] - new_start[trace.root]) / NS_PER_MS)
            for i, t in own_times(trace.root, trace.children, trace.start, trace.end).items():
                key = group_key(trace, i, "stage")
                before_groups[key] = before_groups.get(key, 0.0) + t
            for i, u in own_times(trace.root, trace.children, new_start, new_end).items():
                key = group_key(trace, i, "stage")
                after_groups[key] = after_groups.get(key, 0.0) + u
    finally:
        sys.setrecursionlimit(limit)
    if not before:
        raise NoUsableDataError(
            "no trace could be analysed: " + "; ".join(tally.messages or ["no spans"])
        )
    if not seen_stage:
        known = sorted(before_groups)
        raise ConfigError(
            f"no span is in stage {stage!r}; the stages in these traces are: {', '.join(known)}"
        )
    b, a = stats(before), stats(after)
    realized = {
        key: (getattr(b, key) / getattr(a, key)) if getattr(a, key) > 0 else float("inf")
        for key in ("mean", "p50", "p90", "p99")
    }
    total_before = sum(before_groups.values()) or 1.0
    total_after = sum(after_groups.values()) or 1.0
    return WhatIf(
        stage=stage,
        speedup=float(speedup),
        traces=len(before),
        before=b,
        after=a,
        realized=realized,
        before_groups=_shares(before_groups, total_before),
        after_groups=_shares(after_groups, total_after),
        stage_share=before_groups.get(stage, 0.0) / total_before,
        skipped_traces=tally.skipped_traces + traceset.warnings.skipped_traces,
        messages=tuple(traceset.warnings.messages) + tuple(tally.messages),
    )


def _shares(groups: dict[str, float], total: float) -> tuple[tuple[str, float], ...]:
    rows = [(name, float(v / total)) for name, v in groups.items()]
    rows.sort(key=lambda r: (-r[1], r[0]))
    return tuple(rows)


def ideal_speedup(stage_share: float, speedup: float) -> float:
    """Amdahl's bound for a stage holding ``stage_share`` of the time."""
    return float(1.0 / ((1.0 - stage_share) + stage_share / speedup))
