"""Results as titled tables and sentences, rendered by ``table`` (rich) and ``markdown``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tracer.analysis.aggregate import Analysis, Stats
from tracer.analysis.checks.compare import Comparison
from tracer.analysis.checks.cost import Prices, cost_per_request
from tracer.analysis.model.substages import covers, nested, parent_of
from tracer.analysis.render.calls import calls_headline, calls_notes, whatif_title
from tracer.analysis.sampling.estimate import CONFIDENCE, Interval
from tracer.analysis.table.cache import CacheStats
from tracer.analysis.table.schema import SUMMARIES, Column
from tracer.analysis.whatif.retime import WhatIf, ideal_speedup

__all__ = [
    "OWN_MARK",
    "SUB_MARK",
    "Section",
    "analysis_sections",
    "cache_section",
    "comparison_sections",
    "fmt_ms",
    "fmt_in",
    "fmt_ms_in",
    "fmt_pct",
    "fmt_pct_in",
    "fmt_ratio",
    "fmt_tokens",
    "group_label",
    "groups_section",
    "hops_section",
    "parents_of",
    "row_name",
    "shown_groups",
    "sample_note",
    "warnings_note",
    "whatif_sections",
]


@dataclass
class Section:
    """A title, a table (headers and rows of text) and sentences under it."""

    title: str
    headers: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def fmt_ms(v: float) -> str:
    """Milliseconds as the reports print them."""
    return f"{v:,.1f}"


def fmt_ratio(v: float) -> str:
    """A measured ratio (how many times faster) as every report writes it: ``2.31x``."""
    return f"{v:,.2f}x"


def fmt_tokens(v: float) -> str:
    """A token count: whole when it is one (66), else to one decimal (66.5)."""
    return f"{v:,.0f}" if abs(v - round(v)) < 0.05 else f"{v:,.1f}"


#: The number formats a column's :attr:`~tracer.analysis.table.schema.Column.fmt` names.
#: (A count of anything reads as a token count does.)
FORMATS: dict[str, Callable[[float], str]] = {
    "ms": fmt_ms,
    "tokens": fmt_tokens,
    "count": fmt_tokens,
}


#: Marks a sub-stage's row, shown under its parent's.
SUB_MARK = "↳ "
#: Marks the row of a stage that has sub-stages in the same table: its own time only.
OWN_MARK = " (own time)"


def parents_of(names: list[str] | tuple[str, ...] | set[str]) -> frozenset[str]:
    """The stages among ``names``' parents that have sub-stages among them."""
    return frozenset(parent_of(n) for n in names if "." in n)


def group_label(name: str, by_stage: bool = True, parents: frozenset[str] = frozenset()) -> str:
    """How a table names a group: sub-stages of a stage breakdown marked as such, and a
    stage whose sub-stages are in the table (``parents``) as its own time only."""
    if not by_stage:
        return name
    if "." in name:
        return SUB_MARK + name
    return name + OWN_MARK if name in parents else name


def row_name(label: str) -> str:
    """The group a :func:`group_label` names."""
    return label.removeprefix(SUB_MARK).removesuffix(OWN_MARK)


def _empty(share: float, tail: float, ttft: float | None, mean_ms: float) -> bool:
    return max(share, tail, ttft or 0.0) < 0.0005 and mean_ms < 0.05


def shown_groups(a: Analysis) -> tuple[list, list[str]]:
    """``a``'s groups without the sub-stages no trace spends measurable time in (an
    engine that reports a queue it never uses), and the names left out."""
    keep, gone = [], []
    for g in a.groups:
        if "." in g.name and _empty(g.share, g.tail_share, g.ttft_share, g.mean_ms):
            gone.append(g.name)
        else:
            keep.append(g)
    return keep, gone


def _family_notes(a: Analysis, shown: list, gone: list[str]) -> list[str]:
    """What a parent row and the rows left out mean, in words."""
    notes = []
    for parent in sorted(parents_of([g.name for g in shown])):
        family = [g for g in a.groups if covers(parent, g.name)]
        share = sum(g.share for g in family)
        mean = sum(g.mean_ms for g in family)
        notes.append(
            f"{parent}{OWN_MARK}: the time in {parent} spans outside their sub-stages; "
            f"{parent} with its sub-stages (what --stage {parent} selects): "
            f"{fmt_pct(share)} of the critical path, {fmt_ms(mean)} ms mean"
        )
    if gone:
        notes.append(f"left out: {', '.join(gone)} (no measurable time in any trace)")
    return notes


def fmt_pct(v: float | None) -> str:
    """A share as a percentage ('-' for none)."""
    return "-" if v is None else f"{v * 100:.1f}%"


def fmt_ms_in(v: float, iv: dict[str, Interval] | None, key: str) -> str:
    """Milliseconds, with their interval in parentheses when there is one."""
    return fmt_in("ms", v, iv, key)


def fmt_pct_in(v: float | None, iv: dict[str, Interval] | None, key: str) -> str:
    """A share, with its interval in parentheses when there is one."""
    if v is None or iv is None or key not in iv:
        return fmt_pct(v)
    return f"{fmt_pct(v)} ({iv[key].low * 100:.1f}-{iv[key].high * 100:.1f})"


def fmt_in(fmt: str, v: float, iv: dict[str, Interval] | None, key: str) -> str:
    """A figure in the number format ``fmt`` of :data:`FORMATS` (a column's
    :attr:`~tracer.analysis.table.schema.Column.fmt`), with its interval in parentheses when
    there is one."""
    f = FORMATS[fmt]
    if iv is None or key not in iv:
        return f(v)
    return f"{f(v)} ({f(iv[key].low)}-{f(iv[key].high)})"


def _stats_line(c: Column, s: Stats) -> str:
    """A summarised column's percentiles and mean, labelled, in its unit and format."""
    iv, u = s.intervals, f" {c.unit}" if c.unit else ""
    figures = ", ".join(
        f"{name} {fmt_in(c.fmt, getattr(s, key), iv, key)}{u}"
        for name, key in (("P50", "p50"), ("P90", "p90"), ("P99", "p99"), ("mean", "mean"))
    )
    return f"{c.label}: {figures} (n={s.n})"


def sample_note(a: Analysis) -> str | None:
    """What a sample of the traffic stands for, in one sentence (None for full data)."""
    s = a.sample
    if s is None:
        return None
    rate = (
        f", {s.rate_per_s:,.1f} traces/s ({s.rate_interval.low:,.1f}-{s.rate_interval.high:,.1f})"
        if s.rate_per_s is not None and s.rate_interval is not None
        else ""
    )
    unknown = (
        f"; {s.unknown_weight} of them with no known sampling probability (counted once)"
        if s.unknown_weight
        else ""
    )
    return (
        f"sampled traffic: these {s.kept:,} traces stand for about {s.estimated_traces:,.0f} "
        f"({s.interval.low:,.0f}-{s.interval.high:,.0f}){rate}{unknown}; every figure is an "
        f"estimate, its {CONFIDENCE:.0%} confidence interval in parentheses"
    )


def groups_section(a: Analysis, title: str = "", jaeger_url: str = "") -> Section:
    """The share and percentile table of every group (notes: end-to-end, TTFT)."""
    # No trace with a first token (a service that does not stream): no TTFT column.
    ttft = any(g.ttft_share is not None for g in a.groups)
    head = Section(
        title or f"Where the time goes: {a.traces} traces, {a.spans} spans, by {a.group_by}",
        ["group", "share", "tail share"]
        + (["TTFT share"] if ttft else [])
        + ["mean ms", "P50 ms", "P90 ms", "P99 ms"],
    )
    by_stage = a.group_by == "stage"
    shown, gone = shown_groups(a) if by_stage else (list(a.groups), [])
    parents = parents_of([g.name for g in shown])
    for g in nested(shown, lambda g: g.name) if by_stage else shown:
        iv = g.intervals
        head.rows.append(
            [
                group_label(g.name, by_stage, parents),
                fmt_pct_in(g.share, iv, "share"),
                fmt_pct_in(g.tail_share, iv, "tail_share"),
                *([fmt_pct_in(g.ttft_share, iv, "ttft_share")] if ttft else []),
                fmt_ms_in(g.mean_ms, iv, "mean_ms"),
                fmt_ms_in(g.p50_ms, iv, "p50_ms"),
                fmt_ms_in(g.p90_ms, iv, "p90_ms"),
                fmt_ms_in(g.p99_ms, iv, "p99_ms"),
            ]
        )
    if by_stage:
        head.notes.extend(_family_notes(a, shown, gone))
    sampled = sample_note(a)
    if sampled is not None:
        head.notes.append(sampled)
    for c in SUMMARIES:
        s = a.summaries.get(c.summary)
        if s is not None and c.label:
            head.notes.append(_stats_line(c, s))
    if a.model_ttft is not None and a.ttft is not None:
        head.notes.append(
            f"the chain around the model adds {fmt_ms(a.ttft.p50 - a.model_ttft.p50)} ms to "
            "the first token at P50"
        )
    if a.exemplars:
        head.notes.append(
            "exemplars: P50 trace "
            + a.exemplars.get("p50", "-")
            + ", P90 trace "
            + a.exemplars.get("p90", "-")
            + (f" (open {jaeger_url.rstrip('/') + '/trace/<id>'} in Jaeger)" if jaeger_url else "")
        )
    return head


def hops_section(a: Analysis) -> Section | None:
    """Network time per hop, or None when the traces have no hops."""
    if not a.hops:
        return None
    hops = Section(
        "Network hops (time in CLIENT spans outside the remote server)",
        ["hop", "traces", "mean ms", "P50 ms", "P90 ms"],
    )
    for h in a.hops:
        hops.rows.append(
            [
                f"{h.source} -> {h.target}",
                str(h.n),
                fmt_ms_in(h.mean_ms, h.intervals, "mean_ms"),
                fmt_ms_in(h.p50_ms, h.intervals, "p50_ms"),
                fmt_ms_in(h.p90_ms, h.intervals, "p90_ms"),
            ]
        )
    return hops


def warnings_note(a: Analysis) -> str | None:
    """The warning counts as one sentence, or None when there is nothing to say."""
    w = a.warnings
    if not w.any:
        return None
    return (
        f"orphans re-parented: {w.orphans}; skew-adjusted spans: {w.skew_adjusted}; "
        f"skipped traces: {w.skipped_traces}; skipped spans: {w.skipped_spans}"
        + (f"; conflicting duplicate spans: {w.duplicates}" if w.duplicates else "")
        + (f"; values dropped: {w.dropped_values}" if w.dropped_values else "")
    )


def analysis_sections(
    a: Analysis,
    prices: Prices | None = None,
    title: str = "",
    jaeger_url: str = "",
) -> list[Section]:
    """Sections for one analysis."""
    sections = [groups_section(a, title, jaeger_url)]
    hops = hops_section(a)
    if hops is not None:
        sections.append(hops)
    if a.tokens is not None:
        tok = Section("Tokens")
        tok.notes.append(
            f"{fmt_in('tokens', a.tokens.input_mean, a.tokens.intervals, 'input_mean')} input and "
            f"{fmt_in('tokens', a.tokens.output_mean, a.tokens.intervals, 'output_mean')} "
            "output tokens per "
            f"request over {a.tokens.requests} requests"
            + (f" (models: {', '.join(a.tokens.models)})" if a.tokens.models else "")
        )
        cost = cost_per_request(a, prices or {})
        if cost is not None:
            tok.notes.append(f"cost: {cost:.6f} per request, {cost * 1000:.4f} per 1,000 requests")
        sections.append(tok)
    if a.cache is not None:
        sections.append(cache_section(a.cache))
    counts = warnings_note(a)
    if counts is not None:
        warn = Section("Warnings")
        warn.notes.append(counts)
        warn.notes.extend(a.warnings.messages)
        sections.append(warn)
    return sections


_STATS_KEYS = ("mean", "p50", "p90", "p99")


def whatif_headline(w: WhatIf) -> str:
    """The sentence a manager reads."""
    k = f"{w.speedup:g}"
    rest = [(n, s) for n, s in w.after_groups if not covers(w.stage, n)][:5]
    rest_text = ", ".join(f"{n} {s * 100:.0f}%" for n, s in rest)
    ttft = ""
    if w.ttft_realized_p50 is not None:
        ttft = f", first token {fmt_ratio(w.ttft_realized_p50)} sooner at P50"
    return (
        f"{w.stage} {k}x faster -> end-to-end {fmt_ratio(w.realized['p50'])} faster at P50 "
        f"({fmt_ms(w.before.p50)} -> {fmt_ms(w.after.p50)} ms), "
        f"{fmt_ratio(w.realized['p90'])} at P90"
        f"{ttft}; the rest is {rest_text}."
    )


def whatif_sections(w: WhatIf) -> list[Section]:
    """Sections for a what-if projection."""
    head = Section(whatif_title(w), ["", "mean ms", "P50 ms", "P90 ms", "P99 ms"])
    head.rows.append(
        [
            "before",
            *(fmt_ms_in(getattr(w.before, k), w.before.intervals, k) for k in _STATS_KEYS),
        ]
    )
    head.rows.append(
        [
            "after",
            *(fmt_ms_in(getattr(w.after, k), w.after.intervals, k) for k in _STATS_KEYS),
        ]
    )
    head.rows.append(
        ["speedup"] + [fmt_ratio(w.realized[k]) for k in ("mean", "p50", "p90", "p99")]
    )
    if w.ttft_before is not None and w.ttft_after is not None:
        for label, st in (("TTFT before", w.ttft_before), ("TTFT after", w.ttft_after)):
            head.rows.append(
                [label, fmt_ms(st.mean), fmt_ms(st.p50), fmt_ms(st.p90), fmt_ms(st.p99)]
            )
    head.notes.append(calls_headline(w) if w.calls else whatif_headline(w))
    head.notes.extend(calls_notes(w))
    if w.load is not None:
        lw = w.load
        head.notes.append(
            f"under load ({lw.arrivals}): {lw.throughput_before_per_s:.1f} -> "
            f"{lw.throughput_after_per_s:.1f} requests/s; busiest after: {lw.bottleneck} "
            f"at {lw.utilization_after.get(lw.bottleneck, 0.0) * 100:.0f}%"
        )
        head.notes.extend(lw.notes)
        if lw.attainment is not None and lw.goodput_per_s is not None:
            head.notes.append(
                f"SLO {_limits(lw.slo_limits_ms)}: met by {lw.attainment[0] * 100:.0f}% -> "
                f"{lw.attainment[1] * 100:.0f}% of requests; goodput "
                f"{lw.goodput_per_s[0]:.1f} -> {lw.goodput_per_s[1]:.1f} requests/s"
            )
    head.notes.append(
        f"{w.stage} held {w.stage_share * 100:.1f}% of the critical path; Amdahl's law on the "
        f"mean end-to-end time gives {fmt_ratio(ideal_speedup(w.stage_share, w.speedup))} for "
        f"{w.speedup:g}x on it, nothing else changing (a figure for the mean, not a ceiling "
        "on a percentile)"
    )
    if w.model_reason:
        head.notes.append(f"model: {w.model}, {w.model_reason}")
    levels = None
    if w.load_levels:
        levels = Section(
            f"Under load, each bench level ({w.stage} {w.speedup:g}x faster)",
            ["level", "P50 before", "P50 after", "P90 before", "P90 after", "req/s", "busiest"],
        )
        for run, clients, lw in w.load_levels:
            levels.rows.append(
                [
                    f"{run} ({clients} clients)",
                    fmt_ms(lw.before.p50),
                    fmt_ms(lw.after.p50),
                    fmt_ms(lw.before.p90),
                    fmt_ms(lw.after.p90),
                    f"{lw.throughput_before_per_s:.1f} -> {lw.throughput_after_per_s:.1f}",
                    lw.bottleneck,
                ]
            )
        if w.load_knee is not None:
            knee_was, knee_is = (f"c={c}" if c else "none" for c in w.load_knee)
            levels.notes.append(
                f"knee (added clients bought little throughput while latency grew): "
                f"{knee_was} as measured, {knee_is} after the change"
            )
    shares = Section("Shares of the critical path, before and after", ["group", "before", "after"])
    before = dict(w.before_groups)
    kept = [
        (n, s)
        for n, s in w.after_groups
        if "." not in n or not _empty(max(s, before.get(n, 0.0)), 0.0, None, 0.0)
    ]
    parents = parents_of([n for n, _ in kept])
    for name, share in nested(kept, lambda g: g[0]):
        shares.rows.append(
            [group_label(name, True, parents), fmt_pct(before.get(name, 0.0)), fmt_pct(share)]
        )
    out = [head, *([levels] if levels is not None else []), shares]
    if w.messages or w.skipped_traces:
        warn = Section("Warnings")
        warn.notes.append(f"skipped traces: {w.skipped_traces}")
        warn.notes.extend(w.messages)
        out.append(warn)
    return out


def _limits(limits: tuple[tuple[str, float], ...]) -> str:
    return ",".join(f"{k}={v:g}ms" for k, v in limits)


def _change(ratio: float) -> str:
    """A candidate/baseline ratio in words: ``2.52x faster``, ``1.10x slower``, ``same``."""
    if ratio <= 0 or abs(ratio - 1.0) < 0.005:
        return "same" if ratio > 0 else "-"
    return f"{fmt_ratio(1 / ratio)} faster" if ratio < 1 else f"{fmt_ratio(ratio)} slower"


def comparison_sections(c: Comparison, prices: Prices | None = None) -> list[Section]:
    """Sections for a baseline/candidate comparison (with ``prices``, the cost per
    request of each side)."""
    head = Section(
        f"Candidate ({c.candidate.traces} traces) against baseline ({c.baseline.traces} traces)",
        ["group", "baseline mean ms", "candidate mean ms", "delta mean", "delta P50", "delta P90"],
    )
    by_stage = c.candidate.group_by == "stage"
    kept = [
        d
        for d in c.groups
        if not by_stage
        or "." not in d.name
        or not _empty(0.0, 0.0, None, max(d.baseline_mean_ms, d.candidate_mean_ms))
    ]
    parents = parents_of([d.name for d in kept]) if by_stage else frozenset()
    for d in nested(kept, lambda d: d.name) if by_stage else kept:
        head.rows.append(
            [
                group_label(d.name, by_stage, parents),
                fmt_ms(d.baseline_mean_ms),
                fmt_ms(d.candidate_mean_ms),
                f"{d.delta_mean_ms:+,.1f}",
                f"{d.delta_p50_ms:+,.1f}",
                f"{d.delta_p90_ms:+,.1f}",
            ]
        )
    b, k = c.baseline.e2e, c.candidate.e2e
    head.notes.append(
        f"end-to-end P50 {fmt_ms(b.p50)} -> {fmt_ms(k.p50)} ms ({_change(c.e2e_ratio['p50'])}), "
        f"P90 {fmt_ms(b.p90)} -> {fmt_ms(k.p90)} ms ({_change(c.e2e_ratio['p90'])})"
    )
    if c.moved_most is not None:
        head.notes.append(
            f"moved most: {c.moved_most.name} ({c.moved_most.delta_mean_ms:+,.1f} ms mean)"
        )
    costs = [cost_per_request(a, prices or {}) for a in (c.baseline, c.candidate)]
    if costs[0] is not None and costs[1] is not None:
        head.notes.append(f"cost per request: {costs[0]:.6f} -> {costs[1]:.6f}")
    return [head]


def cache_section(c: CacheStats) -> Section:
    """Cached prompt tokens, and TTFT by how much of the prompt was cached."""
    sec = Section(
        "Prefix cache",
        ["prompt cached", "requests", "TTFT p50", "TTFT p90", "model TTFT p50"],
    )
    sec.notes.append(
        f"{c.cached_mean:,.1f} cached prompt tokens per request over {c.requests} requests: "
        f"{c.cached_share:.0%} of their prompt tokens"
    )
    labels = {"none": "none", "partial": "under half", "mostly": "half or more"}
    for b in c.buckets:
        sec.rows.append(
            [
                labels[b.name],
                str(b.requests),
                "-" if b.ttft_p50_ms is None else fmt_ms(b.ttft_p50_ms),
                "-" if b.ttft_p90_ms is None else fmt_ms(b.ttft_p90_ms),
                "-" if b.model_ttft_p50_ms is None else fmt_ms(b.model_ttft_p50_ms),
            ]
        )
    return sec
