"""Analysis results as the JSON objects of ``docs/analysis.md`` (the contract for scripts)."""

from __future__ import annotations

import math
from typing import Any

import orjson

from tracer.analysis.aggregate import Analysis, Stats
from tracer.analysis.checks.compare import Comparison
from tracer.analysis.checks.cost import cost_per_request
from tracer.analysis.sampling.estimate import CONFIDENCE, Interval
from tracer.analysis.table.figures import Sample
from tracer.analysis.table.schema import SUMMARIES
from tracer.analysis.whatif.afford import Afford
from tracer.analysis.whatif.loadmodel import LoadWhatIf
from tracer.analysis.whatif.retime import WhatIf, ideal_speedup

__all__ = [
    "calls_dict",
    "analysis_dict",
    "comparison_dict",
    "dumps",
    "intervals_dict",
    "number",
    "sample_dict",
    "stats_dict",
    "whatif_dict",
]


def number(value: float) -> float | None:
    """A float for JSON: rounded to 6 decimals, None for infinities and NaN."""
    return None if math.isinf(value) or math.isnan(value) else round(float(value), 6)


def stats_dict(
    s: Stats | None, keys: tuple[str, ...] = ("n", "mean", "p50", "p90", "p99", "min", "max")
) -> dict[str, Any] | None:
    """A :class:`Stats` as a dict with the given keys (None for None); estimates from
    a sample add ``intervals`` (``{"p50": [low, high], ...}``)."""
    if s is None:
        return None
    out = {k: (getattr(s, k) if k == "n" else number(getattr(s, k))) for k in keys}
    if s.intervals is not None:
        out["intervals"] = intervals_dict(s.intervals, keys)
    return out


def intervals_dict(
    intervals: dict[str, Interval], keys: tuple[str, ...] | None = None
) -> dict[str, list[float | None]]:
    """Confidence intervals as ``{figure: [low, high]}`` (only ``keys``, when given)."""
    return {
        k: [number(iv.low), number(iv.high)]
        for k, iv in intervals.items()
        if keys is None or k in keys
    }


def sample_dict(s: Sample) -> dict[str, Any]:
    """What a sample of the traffic stands for (the ``sample`` object)."""
    return {
        "confidence": CONFIDENCE,
        "kept_traces": s.kept,
        "estimated_traces": number(s.estimated_traces),
        "estimated_traces_interval": [number(s.interval.low), number(s.interval.high)],
        "traces_per_s": None if s.rate_per_s is None else number(s.rate_per_s),
        "traces_per_s_interval": None
        if s.rate_interval is None
        else [number(s.rate_interval.low), number(s.rate_interval.high)],
        "unknown_weight_traces": s.unknown_weight,
    }


def analysis_dict(
    a: Analysis, prices: dict[str, tuple[float, float]] | None = None
) -> dict[str, Any]:
    """The ``hoptrace analyze --format json`` object."""
    out: dict[str, Any] = {
        "traces": a.traces,
        "spans": a.spans,
        "group_by": a.group_by,
        # the columns always reported (null when no trace has one), then the others
        **{c.key: stats_dict(a.summaries.get(c.summary)) for c in SUMMARIES if c.always},
        "groups": [
            {
                "name": g.name,
                "share": number(g.share),
                "tail_share": number(g.tail_share),
                "ttft_share": number(g.ttft_share) if g.ttft_share is not None else None,
                "mean_ms": number(g.mean_ms),
                "p50_ms": number(g.p50_ms),
                "p90_ms": number(g.p90_ms),
                "p99_ms": number(g.p99_ms),
                **({} if g.intervals is None else {"intervals": intervals_dict(g.intervals)}),
            }
            for g in a.groups
        ],
        "hops": [
            {
                "from": h.source,
                "to": h.target,
                "n": h.n,
                "mean_ms": number(h.mean_ms),
                "p50_ms": number(h.p50_ms),
                "p90_ms": number(h.p90_ms),
                **({} if h.intervals is None else {"intervals": intervals_dict(h.intervals)}),
            }
            for h in a.hops
        ],
        "warnings": {
            "orphans": a.warnings.orphans,
            "skew_adjusted": a.warnings.skew_adjusted,
            "skipped_traces": a.warnings.skipped_traces,
            "skipped_spans": a.warnings.skipped_spans,
            "duplicates": a.warnings.duplicates,
            "dropped_values": a.warnings.dropped_values,
            "messages": list(a.warnings.messages),
        },
        "exemplars": dict(a.exemplars),
    }
    if a.sample is not None:
        out["sample"] = sample_dict(a.sample)
    if a.tokens is not None:
        tokens: dict[str, Any] = {
            "requests": a.tokens.requests,
            "input_per_request": number(a.tokens.input_mean),
            "output_per_request": number(a.tokens.output_mean),
            "models": list(a.tokens.models),
        }
        if a.tokens.intervals is not None:
            iv = a.tokens.intervals
            tokens["intervals"] = {
                "input_per_request": [number(iv["input_mean"].low), number(iv["input_mean"].high)],
                "output_per_request": [
                    number(iv["output_mean"].low),
                    number(iv["output_mean"].high),
                ],
            }
        cost = cost_per_request(a, prices or {})
        if cost is not None:
            tokens["cost_per_request"] = number(cost)
            tokens["cost_per_1k_requests"] = number(cost * 1000)
        out["tokens"] = tokens
    if a.cache is not None:
        c = a.cache
        out["cache"] = {
            "requests": c.requests,
            "cached_tokens_per_request": number(c.cached_mean),
            "cached_share_of_prompt_tokens": number(c.cached_share),
            "ttft_by_cached_fraction": [
                {
                    "cached": b.name,
                    "requests": b.requests,
                    "ttft_p50_ms": None if b.ttft_p50_ms is None else number(b.ttft_p50_ms),
                    "ttft_p90_ms": None if b.ttft_p90_ms is None else number(b.ttft_p90_ms),
                    "model_ttft_p50_ms": None
                    if b.model_ttft_p50_ms is None
                    else number(b.model_ttft_p50_ms),
                }
                for b in c.buckets
            ],
        }
    for column in SUMMARIES:
        if not column.always and column.summary in a.summaries:
            out[column.key] = stats_dict(a.summaries[column.summary])
    return out


def whatif_dict(w: WhatIf) -> dict[str, Any]:
    """The ``hoptrace whatif --format json`` object."""
    keys = ("mean", "p50", "p90", "p99")
    return {
        "stage": w.stage,
        "speedup": w.speedup,
        "traces": w.traces,
        "before_ms": stats_dict(w.before, keys),
        "after_ms": stats_dict(w.after, keys),
        "realized_speedup": {k: number(v) for k, v in w.realized.items()},
        "ideal_speedup": number(ideal_speedup(w.stage_share, w.speedup)),
        "ideal_speedup_of": "mean",
        "stage_share": number(w.stage_share),
        "before_groups": [{"name": n, "share": number(s)} for n, s in w.before_groups],
        "after_groups": [{"name": n, "share": number(s)} for n, s in w.after_groups],
        "ttft_before_ms": stats_dict(w.ttft_before, keys),
        "ttft_after_ms": stats_dict(w.ttft_after, keys),
        "warnings": {"skipped_traces": w.skipped_traces, "messages": list(w.messages)},
        "model": w.model,
        "model_reason": w.model_reason,
        **calls_dict(w),
        **(_load_dict(w.load) if w.load is not None else {}),
        **(
            {
                "levels": [
                    {"run": run, "clients": clients, **_load_dict(lw, before_after=True)}
                    for run, clients, lw in w.load_levels
                ],
                "knee": {
                    "before": w.load_knee[0] if w.load_knee else None,
                    "after": w.load_knee[1] if w.load_knee else None,
                },
            }
            if w.load_levels
            else {}
        ),
    }


def _load_dict(load: LoadWhatIf, before_after: bool = False) -> dict[str, Any]:
    """What the load model adds to the what-if's JSON (with ``before_after``, a level's
    own before and after too)."""
    keys = ("mean", "p50", "p90", "p99")
    own: dict[str, Any] = {}
    if before_after:
        own = {
            "before_ms": stats_dict(load.before, keys),
            "after_ms": stats_dict(load.after, keys),
            "ttft_before_ms": stats_dict(load.ttft_before, keys),
            "ttft_after_ms": stats_dict(load.ttft_after, keys),
        }
    slo = None
    if load.attainment is not None and load.goodput_per_s is not None:
        slo = {
            "limits_ms": {k: number(v) for k, v in load.slo_limits_ms},
            "attainment": {
                "before": number(load.attainment[0]),
                "after": number(load.attainment[1]),
            },
            "goodput_per_s": {
                "before": number(load.goodput_per_s[0]),
                "after": number(load.goodput_per_s[1]),
            },
        }
    return {
        **own,
        "slo": slo,
        "arrivals": load.arrivals,
        "throughput_per_s": {
            "before": number(load.throughput_before_per_s),
            "after": number(load.throughput_after_per_s),
        },
        "bottleneck": {
            "resource": load.bottleneck,
            "utilization": number(load.utilization_after.get(load.bottleneck, 0.0)),
        },
        "utilization_after": {k: number(v) for k, v in load.utilization_after.items()},
        "simulated_before_ms": stats_dict(load.simulated_before, keys),
        "load_notes": list(load.notes),
    }


def comparison_dict(c: Comparison) -> dict[str, Any]:
    """The ``hoptrace compare --format json`` object."""
    return {
        "baseline": analysis_dict(c.baseline),
        "candidate": analysis_dict(c.candidate),
        "e2e_ratio": {k: number(v) for k, v in c.e2e_ratio.items()},
        "moved_most": c.moved_most.name if c.moved_most else None,
        "groups": [
            {
                "name": d.name,
                "delta_mean_ms": number(d.delta_mean_ms),
                "delta_p50_ms": number(d.delta_p50_ms),
                "delta_p90_ms": number(d.delta_p90_ms),
            }
            for d in c.groups
        ],
    }


def dumps(obj: Any) -> str:
    """Pretty JSON text."""
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode()


def calls_dict(w: WhatIf) -> dict[str, Any]:
    """What the JSON of a what-if adds: ``change``, ``calls``, ``cost_per_request`` and
    ``afford`` (null where they do not apply)."""
    afford = w.afford
    return {
        "change": w.change,
        "calls": [
            {"stage": stage, "n": n, "arrangement": "parallel" if parallel else "sequence"}
            for stage, n, parallel in w.calls
        ],
        "cost_per_request": None
        if w.cost_per_request is None
        else {"before": number(w.cost_per_request[0]), "after": number(w.cost_per_request[1])},
        "afford": None
        if not isinstance(afford, Afford)
        else {
            "stage": afford.stage,
            "arrangement": "parallel" if afford.parallel else "sequence",
            "calls": afford.calls,
            "bound": afford.bound,
            "slo": afford.slo.as_dict(),
            "attainment_target": number(afford.target),
            "attainment": number(afford.attainment),
            "p50_ms": number(afford.p50_ms),
            "p90_ms": number(afford.p90_ms),
            "goodput_per_s": None if afford.goodput_per_s is None else number(afford.goodput_per_s),
            "cost_per_request": None
            if afford.cost_per_request is None
            else number(afford.cost_per_request),
            "model": afford.model,
            "tried": [{"calls": n, "attainment": number(s)} for n, s in afford.tried],
        },
    }
