"""A budget check as PASS/FAIL lines and as JSON (``hoptrace check``)."""

from __future__ import annotations

from typing import Any

from tracer.analysis.budget import SHARE_KEYS, BudgetResult
from tracer.analysis.render.json_out import number

__all__ = ["budget_dict", "budget_text"]


def budget_text(result: BudgetResult) -> str:
    """One ``PASS``/``FAIL`` line per limit with the measured value, then a summary."""
    width = max((len(f"{v.scope} {v.key}") for v in result.verdicts), default=0)
    lines = []
    for v in result.verdicts:
        if v.measured is None:
            lines.append(f"n/a   {f'{v.scope} {v.key}':<{width}}  no such spans in these traces")
            continue
        share = v.key in SHARE_KEYS
        shown = f"{v.measured:.3f}" if share else f"{v.measured:,.1f} ms"
        bound = f"{v.limit:g}" if share else f"{v.limit:,.1f} ms"
        sign = "<=" if v.passed else ">"
        lines.append(
            f"{'PASS' if v.passed else 'FAIL'}  {f'{v.scope} {v.key}':<{width}}  "
            f"{shown} {sign} {bound}"
        )
    failed = len(result.failed)
    applicable = sum(1 for v in result.verdicts if v.measured is not None)
    lines.append(
        f"{applicable - failed} of {applicable} limits met over "
        f"{result.traces} traces" + (f"; {failed} exceeded" if failed else "")
    )
    return "\n".join(lines)


def budget_dict(result: BudgetResult) -> dict[str, Any]:
    """The ``hoptrace check --format json`` object."""
    return {
        "traces": result.traces,
        "passed": result.passed,
        "checks": [
            {
                "scope": v.scope,
                "key": v.key,
                "limit": v.limit,
                "measured": None if v.measured is None else number(v.measured),
                "passed": v.passed,
            }
            for v in result.verdicts
        ],
    }
