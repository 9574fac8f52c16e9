"""A budget check as PASS/FAIL lines and as JSON (``hoptrace check``)."""

from __future__ import annotations

from typing import Any

from tracer.analysis.checks.budget import SHARE_KEYS, BudgetResult
from tracer.analysis.render.json_out import number
from tracer.analysis.sampling.estimate import CONFIDENCE

__all__ = ["budget_dict", "budget_text"]


def budget_text(result: BudgetResult) -> str:
    """One ``PASS``/``FAIL`` line per limit with the measured value (and, from a sample,
    its interval; ``UNDECIDED`` when the interval holds the limit), then a summary."""
    width = max((len(f"{v.scope} {v.key}") for v in result.verdicts), default=0)
    label = 9 if result.undecided else 4  # "UNDECIDED"
    lines = []
    for v in result.verdicts:
        name = f"{v.scope} {v.key}"
        if v.measured is None:
            lines.append(f"{'n/a':<{label}}  {name:<{width}}  no such spans in these traces")
            continue
        share = v.key in SHARE_KEYS
        shown = f"{v.measured:.3f}" if share else f"{v.measured:,.1f} ms"
        if v.interval is not None:
            low, high = v.interval.low, v.interval.high
            shown += f" ({low:.3f}-{high:.3f})" if share else f" ({low:,.1f}-{high:,.1f} ms)"
        bound = f"{v.limit:g}" if share else f"{v.limit:,.1f} ms"
        if v.undecided:
            lines.append(
                f"{'UNDECIDED':<{label}}  {name:<{width}}  {shown} holds {bound}: the sample "
                "is too small to decide"
            )
            continue
        sign = "<=" if v.passed else ">"
        lines.append(
            f"{'PASS' if v.passed else 'FAIL':<{label}}  {name:<{width}}  {shown} {sign} {bound}"
        )
    failed, undecided = len(result.failed), len(result.undecided)
    applicable = sum(1 for v in result.verdicts if v.measured is not None)
    met = applicable - failed - undecided
    lines.append(
        f"{met} of {applicable} limits met over {result.traces} traces"
        + (f"; {failed} exceeded" if failed else "")
        + (f"; {undecided} undecided (the sample is too small to decide)" if undecided else "")
        + (f" (sampled traffic: {CONFIDENCE:.0%} confidence intervals)" if result.sampled else "")
    )
    return "\n".join(lines)


def budget_dict(result: BudgetResult) -> dict[str, Any]:
    """The ``hoptrace check --format json`` object."""
    out: dict[str, Any] = {
        "traces": result.traces,
        "passed": result.passed,
        "checks": [
            {
                "scope": v.scope,
                "key": v.key,
                "limit": v.limit,
                "measured": None if v.measured is None else number(v.measured),
                "passed": v.passed,
                **(
                    {}
                    if v.interval is None
                    else {
                        "interval": [number(v.interval.low), number(v.interval.high)],
                        "verdict": "undecided" if v.undecided else ("pass" if v.passed else "fail"),
                    }
                ),
            }
            for v in result.verdicts
        ],
    }
    if result.sampled:
        out["confidence"] = CONFIDENCE
        out["undecided"] = len(result.undecided)
    return out
