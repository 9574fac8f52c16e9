"""Compare a baseline run with a candidate (``docs/analysis.md``, compare)."""

from __future__ import annotations

from dataclasses import dataclass

from tracer.analysis.aggregate import Analysis

__all__ = ["Comparison", "GroupDelta", "compare"]


@dataclass(frozen=True, slots=True)
class GroupDelta:
    """Candidate minus baseline for one group (ms)."""

    name: str
    delta_mean_ms: float
    delta_p50_ms: float
    delta_p90_ms: float
    baseline_mean_ms: float
    candidate_mean_ms: float


@dataclass(frozen=True, slots=True)
class Comparison:
    """Two analyses side by side; ``groups`` is sorted by |delta mean|, largest first."""

    baseline: Analysis
    candidate: Analysis
    e2e_ratio: dict[str, float]
    groups: tuple[GroupDelta, ...]

    @property
    def moved_most(self) -> GroupDelta | None:
        """The group whose mean moved most."""
        return self.groups[0] if self.groups else None


def compare(baseline: Analysis, candidate: Analysis) -> Comparison:
    """Per-group deltas and end-to-end ratios, candidate against baseline."""
    base = {g.name: g for g in baseline.groups}
    cand = {g.name: g for g in candidate.groups}
    deltas = []
    for name in sorted(set(base) | set(cand)):
        b, c = base.get(name), cand.get(name)
        deltas.append(
            GroupDelta(
                name=name,
                delta_mean_ms=(c.mean_ms if c else 0.0) - (b.mean_ms if b else 0.0),
                delta_p50_ms=(c.p50_ms if c else 0.0) - (b.p50_ms if b else 0.0),
                delta_p90_ms=(c.p90_ms if c else 0.0) - (b.p90_ms if b else 0.0),
                baseline_mean_ms=b.mean_ms if b else 0.0,
                candidate_mean_ms=c.mean_ms if c else 0.0,
            )
        )
    deltas.sort(key=lambda d: (-abs(d.delta_mean_ms), d.name))
    ratio = {
        key: (getattr(candidate.e2e, key) / getattr(baseline.e2e, key))
        if getattr(baseline.e2e, key) > 0
        else float("inf")
        for key in ("p50", "p90")
    }
    return Comparison(baseline, candidate, ratio, tuple(deltas))
