"""Results as titled tables and sentences, rendered by ``table`` (rich) and ``markdown``."""

from __future__ import annotations

from dataclasses import dataclass, field

from tracer.analysis.aggregate import Analysis, Stats
from tracer.analysis.compare import Comparison
from tracer.analysis.render.json_out import cost_per_request
from tracer.analysis.whatif import WhatIf, ideal_speedup

__all__ = ["Section", "analysis_sections", "comparison_sections", "whatif_sections"]


@dataclass
class Section:
    """A title, a table (headers and rows of text) and sentences under it."""

    title: str
    headers: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _ms(v: float) -> str:
    return f"{v:,.1f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.1f}%"


def _stats_line(label: str, s: Stats) -> str:
    return (
        f"{label}: P50 {_ms(s.p50)} ms, P90 {_ms(s.p90)} ms, P99 {_ms(s.p99)} ms, "
        f"mean {_ms(s.mean)} ms (n={s.n})"
    )


def analysis_sections(
    a: Analysis, prices: dict[str, tuple[float, float]] | None = None, title: str = ""
) -> list[Section]:
    """Sections for one analysis."""
    head = Section(
        title or f"Where the time goes: {a.traces} traces, {a.spans} spans, by {a.group_by}",
        ["group", "share", "tail share", "TTFT share", "mean ms", "P50 ms", "P90 ms", "P99 ms"],
    )
    for g in a.groups:
        head.rows.append(
            [
                g.name,
                _pct(g.share),
                _pct(g.tail_share),
                _pct(g.ttft_share),
                _ms(g.mean_ms),
                _ms(g.p50_ms),
                _ms(g.p90_ms),
                _ms(g.p99_ms),
            ]
        )
    head.notes.append(_stats_line("end-to-end", a.e2e))
    if a.ttft is not None:
        head.notes.append(_stats_line("time to first token, as the client sees it", a.ttft))
    if a.model_ttft is not None:
        head.notes.append(_stats_line("time to first token inside the model server", a.model_ttft))
        if a.ttft is not None:
            head.notes.append(
                f"the chain around the model adds {_ms(a.ttft.p50 - a.model_ttft.p50)} ms to "
                "the first token at P50"
            )
    if a.exemplars:
        head.notes.append(
            "exemplars: P50 trace "
            + a.exemplars.get("p50", "-")
            + ", P90 trace "
            + a.exemplars.get("p90", "-")
            + " (open http://localhost:16686/trace/<id> in Jaeger)"
        )
    sections = [head]
    if a.hops:
        hops = Section(
            "Network hops (time in CLIENT spans outside the remote server)",
            ["hop", "traces", "mean ms", "P50 ms", "P90 ms"],
        )
        for h in a.hops:
            hops.rows.append(
                [
                    f"{h.source} -> {h.target}",
                    str(h.n),
                    _ms(h.mean_ms),
                    _ms(h.p50_ms),
                    _ms(h.p90_ms),
                ]
            )
        sections.append(hops)
    if a.tokens is not None:
        tok = Section("Tokens")
        tok.notes.append(
            f"{a.tokens.input_mean:,.1f} input and {a.tokens.output_mean:,.1f} output tokens per "
            f"request over {a.tokens.requests} requests"
            + (f" (models: {', '.join(a.tokens.models)})" if a.tokens.models else "")
        )
        cost = cost_per_request(a, prices or {})
        if cost is not None:
            tok.notes.append(f"cost: {cost:.6f} per request, {cost * 1000:.4f} per 1,000 requests")
        sections.append(tok)
    w = a.warnings
    if w.orphans or w.skew_adjusted or w.skipped_traces or w.skipped_spans or w.messages:
        warn = Section("Warnings")
        warn.notes.append(
            f"orphans re-parented: {w.orphans}; skew-adjusted spans: {w.skew_adjusted}; "
            f"skipped traces: {w.skipped_traces}; skipped spans: {w.skipped_spans}"
        )
        warn.notes.extend(w.messages)
        sections.append(warn)
    return sections


def whatif_headline(w: WhatIf) -> str:
    """The sentence a manager reads."""
    k = f"{w.speedup:g}"
    rest = [(n, s) for n, s in w.after_groups if n != w.stage][:5]
    rest_text = ", ".join(f"{n} {s * 100:.0f}%" for n, s in rest)
    return (
        f"{w.stage} {k}x faster -> end-to-end {w.realized['p50']:.1f}x faster at P50 "
        f"({_ms(w.before.p50)} -> {_ms(w.after.p50)} ms), {w.realized['p90']:.1f}x at P90; "
        f"the rest is {rest_text}."
    )


def whatif_sections(w: WhatIf) -> list[Section]:
    """Sections for a what-if projection."""
    head = Section(
        f"What if {w.stage} were {w.speedup:g}x faster ({w.traces} traces)",
        ["", "mean ms", "P50 ms", "P90 ms", "P99 ms"],
    )
    head.rows.append(
        ["before", _ms(w.before.mean), _ms(w.before.p50), _ms(w.before.p90), _ms(w.before.p99)]
    )
    head.rows.append(
        ["after", _ms(w.after.mean), _ms(w.after.p50), _ms(w.after.p90), _ms(w.after.p99)]
    )
    head.rows.append(["speedup"] + [f"{w.realized[k]:.2f}x" for k in ("mean", "p50", "p90", "p99")])
    head.notes.append(whatif_headline(w))
    head.notes.append(
        f"{w.stage} held {w.stage_share * 100:.1f}% of the critical path; Amdahl's bound for "
        f"{w.speedup:g}x on it is {ideal_speedup(w.stage_share, w.speedup):.2f}x"
    )
    shares = Section("Shares of the critical path, before and after", ["group", "before", "after"])
    before = dict(w.before_groups)
    for name, share in w.after_groups:
        shares.rows.append([name, _pct(before.get(name, 0.0)), _pct(share)])
    out = [head, shares]
    if w.messages or w.skipped_traces:
        warn = Section("Warnings")
        warn.notes.append(f"skipped traces: {w.skipped_traces}")
        warn.notes.extend(w.messages)
        out.append(warn)
    return out


def comparison_sections(c: Comparison) -> list[Section]:
    """Sections for a baseline/candidate comparison."""
    head = Section(
        f"Candidate ({c.candidate.traces} traces) against baseline ({c.baseline.traces} traces)",
        ["group", "baseline mean ms", "candidate mean ms", "delta mean", "delta P50", "delta P90"],
    )
    for d in c.groups:
        head.rows.append(
            [
                d.name,
                _ms(d.baseline_mean_ms),
                _ms(d.candidate_mean_ms),
                f"{d.delta_mean_ms:+,.1f}",
                f"{d.delta_p50_ms:+,.1f}",
                f"{d.delta_p90_ms:+,.1f}",
            ]
        )
    b, k = c.baseline.e2e, c.candidate.e2e
    head.notes.append(
        f"end-to-end P50 {_ms(b.p50)} -> {_ms(k.p50)} ms (x{c.e2e_ratio['p50']:.3f}), "
        f"P90 {_ms(b.p90)} -> {_ms(k.p90)} ms (x{c.e2e_ratio['p90']:.3f})"
    )
    if c.moved_most is not None:
        head.notes.append(
            f"moved most: {c.moved_most.name} ({c.moved_most.delta_mean_ms:+,.1f} ms mean)"
        )
    return [head]
