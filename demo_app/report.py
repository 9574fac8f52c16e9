"""The demo's result as text, Markdown, JSON and one HTML page."""

from __future__ import annotations

import dataclasses
from typing import Any

from demo_app.run import DemoBuys, DemoResult
from tracer.analysis import exemplar_waterfalls, render
from tracer.analysis.render.json_out import number
from tracer.analysis.render.sections import Section, fmt_ratio

__all__ = ["demo_dict", "demo_page", "demo_sections"]


def demo_sections(result: DemoResult, jaeger_url: str = "") -> list[Section]:
    """Both runs, the projection, the comparison and the answer."""
    base, cand, answer = result.baseline, result.candidate, result.answer
    k = f"{answer.speedup:g}"
    sections = render.analysis_sections(
        base,
        title=f"Baseline: the model as it is ({base.traces} traces, profile {result.profile})",
        jaeger_url=jaeger_url,
    )
    sections += render.analysis_sections(
        cand,
        title=f"Candidate: the model {k}x faster ({cand.traces} traces)",
        jaeger_url=jaeger_url,
    )
    sections += render.whatif_sections(result.projection)
    for projection in result.phases:
        sections += render.whatif_sections(projection)[:1]
    sections += render.comparison_sections(result.comparison)
    summary = Section("The answer")
    how = f" ({result.projection.model} model: {result.projection.model_reason})"
    summary.notes.append(
        f"model {k}x faster: projected end-to-end {fmt_ratio(answer.projected_p50)} at "
        f"P50 ({answer.projected_after_p50_ms:,.0f} ms), measured {fmt_ratio(answer.measured_p50)} "
        f"({answer.baseline_p50_ms:,.0f} -> {answer.candidate_p50_ms:,.0f} ms){how}"
    )
    for phase, p50, p90, ttft in answer.phases:
        first = f", first token {fmt_ratio(ttft)} sooner" if ttft is not None else ""
        summary.notes.append(
            f"only {phase} {k}x faster: end-to-end {fmt_ratio(p50)} at P50, "
            f"{fmt_ratio(p90)} at P90{first}"
        )
    for run, tiers in result.tiers.items():
        if tiers:
            summary.notes.append(
                f"{run} requests by fallback tier: "
                + ", ".join(f"{tier} {n}" for tier, n in tiers.items())
            )
    cost = result.overhead
    if cost is not None:
        lo, hi = cost.spread_ms("p50")
        cpu = cost.cpu_per_request_ms()
        cpu_text = f", {cpu:+.2f} ms of CPU per request in the services" if cpu is not None else ""
        summary.notes.append(
            f"what tracing itself costs: {cost.per_request_ms('p50'):+.2f} ms per request at "
            f"P50 ({cost.per_hop_ms('p50'):+.2f} ms per hop; rounds {lo:+.2f} to {hi:+.2f} ms)"
            f"{cpu_text}, measured on traced and untraced loopback copies of this chain "
            f"({len(cost.pairs)} rounds of {cost.requests} requests to each, alternating "
            "request by request; benchmarks/chain_overhead.py measures it carefully)"
        )
    summary.notes.append(
        "where the time went after the speedup: "
        + ", ".join(f"{name} {share * 100:.0f}%" for name, share in answer.rest)
    )
    summary.notes.append(
        f"P50 / P90 exemplar traces: {cand.exemplars['p50']} / {cand.exemplars['p90']}"
        + (f" (Jaeger: {jaeger_url.rstrip('/')}/trace/<id>)" if jaeger_url else "")
    )
    summary.notes.append(
        f"network time is simulated: the {result.profile} profile adds the latency of "
        "each hop (loopback has almost none); --profile loopback adds nothing"
    )
    store, run = result.store_path, result.demo_id
    # One command a line, never wrapped, so each pastes whole.
    summary.notes += [
        f"the spans are in {store}; to look again:",
        f"    hoptrace analyze {store} --run '{run}:baseline'",
        f"    hoptrace compare {store} {store} --baseline-run '{run}:baseline' "
        f"--candidate-run '{run}:candidate'",
        f"    hoptrace report {store} --run '{run}:baseline' --stage inference --speedup {k} "
        "-o report.html",
    ]
    if result.buys is not None:
        summary.notes.append(_buys_text(result.buys, k))
    sections.append(summary)
    return sections


def _ms_more(ms: float) -> str:
    """``+12 ms``; a difference that rounds to nothing is ``+0 ms``, never ``-0 ms``."""
    return f"{round(ms) or 0:+,d} ms"


def _buys_text(buys: DemoBuys, k: str) -> str:
    """What the faster model affords, in calls: one sentence."""
    text = (
        f"what {k}x buys: a self-check round (the model called twice in sequence) costs "
        f"{_ms_more(buys.self_check_p50_ms - buys.faster_p50_ms)} at P50, best-of-3 (three "
        f"calls in parallel) {_ms_more(buys.best_of_3_p50_ms - buys.faster_p50_ms)}"
    )
    most = buys.afford
    if most is None:
        return text
    limit = most.slo.limit_ms("e2e") or 0.0
    within = f"within the baseline's P90 (e2e <= {limit:,.0f} ms) for {most.target * 100:.0f}%"
    if most.calls == 0:
        return f"{text}; {within}, not even one call fits"
    more = " or more" if most.calls >= most.bound else ""
    return (
        f"{text}; {within}, {most.calls}{more} sequential calls fit (P50 "
        f"{most.p50_ms:,.0f} ms, P90 {most.p90_ms:,.0f} ms; projected from the baseline's "
        f"traces, {most.model} model)"
    )


def demo_dict(result: DemoResult) -> dict[str, Any]:
    """The ``hoptrace demo --format json`` object."""
    answer = result.answer
    return {
        "baseline": render.analysis_dict(result.baseline),
        "candidate": render.analysis_dict(result.candidate),
        "whatif": render.whatif_dict(result.projection),
        "compare": render.comparison_dict(result.comparison),
        "answer": {
            "speedup": answer.speedup,
            "projected_p50": number(answer.projected_p50),
            "measured_p50": number(answer.measured_p50),
            "baseline_p50_ms": number(answer.baseline_p50_ms),
            "candidate_p50_ms": number(answer.candidate_p50_ms),
            "phases": [
                {
                    "stage": phase,
                    "realized_p50": number(p50),
                    "realized_p90": number(p90),
                    "ttft_speedup_p50": None if ttft is None else number(ttft),
                }
                for phase, p50, p90, ttft in answer.phases
            ],
        },
        "phases": [render.whatif_dict(w) for w in result.phases],
        "buys": None if result.buys is None else _buys_dict(result.buys),
        "fallback_tiers": result.tiers,
        "tracing_cost": None
        if result.overhead is None
        else {
            "per_request_p50_ms": number(result.overhead.per_request_ms("p50")),
            "per_hop_p50_ms": number(result.overhead.per_hop_ms("p50")),
            "per_request_p90_ms": number(result.overhead.per_request_ms("p90")),
            "cpu_per_request_ms": None
            if result.overhead.cpu_per_request_ms() is None
            else number(result.overhead.cpu_per_request_ms() or 0.0),
            "pairs": len(result.overhead.pairs),
            "requests_per_run": result.overhead.requests,
        },
        "store": str(result.store_path),
        "run": result.demo_id,
    }


def _buys_dict(buys: DemoBuys) -> dict[str, Any]:
    most = buys.afford
    return {
        "faster_p50_ms": number(buys.faster_p50_ms),
        "self_check_p50_ms": number(buys.self_check_p50_ms),
        "best_of_3_p50_ms": number(buys.best_of_3_p50_ms),
        "most_sequential_calls": None
        if most is None
        else {
            "calls": most.calls,
            "slo": most.slo.as_dict(),
            "attainment_target": number(most.target),
            "p50_ms": number(most.p50_ms),
            "p90_ms": number(most.p90_ms),
            "model": most.model,
        },
    }


def demo_page(result: DemoResult, jaeger_url: str = "") -> render.Report:
    """One page: the candidate's shares and waterfalls, the projection, the comparison."""
    k = f"{result.answer.speedup:g}"
    return render.Report(
        title=f"hoptrace demo: the model {k}x faster (profile {result.profile})",
        source=f"{result.store_path}, runs {result.demo_id}:baseline and "
        f"{result.demo_id}:candidate",
        analysis=result.candidate,
        # What the faster model affords in calls, under the what-if's table.
        whatif=result.projection
        if result.buys is None
        else dataclasses.replace(result.projection, afford=result.buys.afford),
        comparison=result.comparison,
        # The candidate's exemplars as measured, and the baseline's P50 exemplar as the
        # what-if projects it (drawn in the what-if view).
        waterfalls=exemplar_waterfalls(result.candidate, result.candidate_traces)
        + [
            wf
            for wf in exemplar_waterfalls(
                result.baseline,
                result.baseline_traces,
                projection=(result.projection.stage, result.projection.speedup),
            )
            if wf.note
        ],
        jaeger_url=jaeger_url,
    )
