"""Analysis results as the JSON objects of SPEC.md section 8."""

from __future__ import annotations

import math
from typing import Any

import orjson

from tracer.analysis.aggregate import Analysis, Stats
from tracer.analysis.compare import Comparison
from tracer.analysis.whatif import WhatIf, ideal_speedup

__all__ = ["analysis_dict", "comparison_dict", "dumps", "stats_dict", "whatif_dict"]


def _f(value: float) -> float | None:
    return None if math.isinf(value) or math.isnan(value) else round(float(value), 6)


def stats_dict(
    s: Stats, keys: tuple[str, ...] = ("n", "mean", "p50", "p90", "p99", "min", "max")
) -> dict[str, Any]:
    """A :class:`Stats` as a dict with the given keys."""
    return {k: (getattr(s, k) if k == "n" else _f(getattr(s, k))) for k in keys}


def analysis_dict(
    a: Analysis, prices: dict[str, tuple[float, float]] | None = None
) -> dict[str, Any]:
    """The ``hoptrace analyze --format json`` object."""
    out: dict[str, Any] = {
        "traces": a.traces,
        "spans": a.spans,
        "group_by": a.group_by,
        "e2e_ms": stats_dict(a.e2e),
        "ttft_ms": stats_dict(a.ttft) if a.ttft else None,
        "model_ttft_ms": stats_dict(a.model_ttft) if a.model_ttft else None,
        "groups": [
            {
                "name": g.name,
                "share": _f(g.share),
                "tail_share": _f(g.tail_share),
                "ttft_share": _f(g.ttft_share) if g.ttft_share is not None else None,
                "mean_ms": _f(g.mean_ms),
                "p50_ms": _f(g.p50_ms),
                "p90_ms": _f(g.p90_ms),
                "p99_ms": _f(g.p99_ms),
            }
            for g in a.groups
        ],
        "hops": [
            {
                "from": h.source,
                "to": h.target,
                "n": h.n,
                "mean_ms": _f(h.mean_ms),
                "p50_ms": _f(h.p50_ms),
                "p90_ms": _f(h.p90_ms),
            }
            for h in a.hops
        ],
        "warnings": {
            "orphans": a.warnings.orphans,
            "skew_adjusted": a.warnings.skew_adjusted,
            "skipped_traces": a.warnings.skipped_traces,
            "skipped_spans": a.warnings.skipped_spans,
            "messages": list(a.warnings.messages),
        },
        "exemplars": dict(a.exemplars),
    }
    if a.tokens is not None:
        tokens: dict[str, Any] = {
            "requests": a.tokens.requests,
            "input_per_request": _f(a.tokens.input_mean),
            "output_per_request": _f(a.tokens.output_mean),
            "models": list(a.tokens.models),
        }
        cost = cost_per_request(a, prices or {})
        if cost is not None:
            tokens["cost_per_request"] = _f(cost)
            tokens["cost_per_1k_requests"] = _f(cost * 1000)
        out["tokens"] = tokens
    return out


def cost_per_request(a: Analysis, prices: dict[str, tuple[float, float]]) -> float | None:
    """Mean cost of a request: price per 1k tokens x tokens, over the priced models.

    A ``*`` entry prices every model.
    """
    if a.tokens is None or not prices:
        return None
    total = 0.0
    priced = False
    for b in a.breakdowns:
        if b.input_tokens is None:
            continue
        price = prices.get(b.model or "") or prices.get("*")
        if price is None:
            continue
        priced = True
        total += (b.input_tokens or 0) / 1000 * price[0] + (b.output_tokens or 0) / 1000 * price[1]
    return total / a.tokens.requests if priced else None


def whatif_dict(w: WhatIf) -> dict[str, Any]:
    """The ``hoptrace whatif --format json`` object."""
    keys = ("mean", "p50", "p90", "p99")
    return {
        "stage": w.stage,
        "speedup": w.speedup,
        "traces": w.traces,
        "before_ms": stats_dict(w.before, keys),
        "after_ms": stats_dict(w.after, keys),
        "realized_speedup": {k: _f(v) for k, v in w.realized.items()},
        "ideal_speedup": _f(ideal_speedup(w.stage_share, w.speedup)),
        "stage_share": _f(w.stage_share),
        "before_groups": [{"name": n, "share": _f(s)} for n, s in w.before_groups],
        "after_groups": [{"name": n, "share": _f(s)} for n, s in w.after_groups],
        "warnings": {"skipped_traces": w.skipped_traces, "messages": list(w.messages)},
    }


def comparison_dict(c: Comparison) -> dict[str, Any]:
    """The ``hoptrace compare --format json`` object."""
    return {
        "baseline": analysis_dict(c.baseline),
        "candidate": analysis_dict(c.candidate),
        "e2e_ratio": {k: _f(v) for k, v in c.e2e_ratio.items()},
        "moved_most": c.moved_most.name if c.moved_most else None,
        "groups": [
            {
                "name": d.name,
                "delta_mean_ms": _f(d.delta_mean_ms),
                "delta_p50_ms": _f(d.delta_p50_ms),
                "delta_p90_ms": _f(d.delta_p90_ms),
            }
            for d in c.groups
        ],
    }


def dumps(obj: Any) -> str:
    """Pretty JSON text."""
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode()
