"""Aggregation over many traces (``docs/analysis.md``, aggregation) and the ``analyze`` pipeline."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from tracer._errors import ConfigError, NoUsableDataError
from tracer.analysis._parallel import gc_paused
from tracer.analysis.breakdown import GROUP_BY, TraceBreakdown, break_down
from tracer.analysis.prepare import PreparedTrace, StageMap, prepare
from tracer.analysis.substages import covers
from tracer.analysis.traceset import TraceSet
from tracer.spans.model import Warnings

__all__ = [
    "Analysis",
    "GroupStats",
    "HopStats",
    "Stats",
    "TokenStats",
    "aggregate",
    "analyze",
    "iter_prepared",
    "selected_group",
    "stats",
]

NS_PER_MS = 1e6
MIN_TRACES = 10


@dataclass(frozen=True, slots=True)
class Stats:
    """Summary of a sample in milliseconds; percentiles interpolate linearly."""

    n: int
    mean: float
    p50: float
    p90: float
    p99: float
    min: float
    max: float


def stats(values_ms: Iterable[float]) -> Stats:
    """:class:`Stats` of ``values_ms`` (all zeros for an empty sample)."""
    arr = np.fromiter(values_ms, dtype=float)
    if arr.size == 0:
        return Stats(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    p50, p90, p99 = np.percentile(arr, [50, 90, 99])
    return Stats(
        int(arr.size),
        float(arr.mean()),
        float(p50),
        float(p90),
        float(p99),
        float(arr.min()),
        float(arr.max()),
    )


@dataclass(frozen=True, slots=True)
class GroupStats:
    """One group's share of the time and its per-trace distribution (ms)."""

    name: str
    share: float
    tail_share: float
    ttft_share: float | None
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float


@dataclass(frozen=True, slots=True)
class HopStats:
    """Network time of one hop ``from -> to`` over the traces that have it (ms)."""

    source: str
    target: str
    n: int
    mean_ms: float
    p50_ms: float
    p90_ms: float


@dataclass(frozen=True, slots=True)
class TokenStats:
    """Tokens per request over the traces whose inference spans carry usage."""

    requests: int
    input_mean: float
    output_mean: float
    models: tuple[str, ...]
    input_total: int
    output_total: int


@dataclass(frozen=True, slots=True)
class Analysis:
    """The result of :func:`analyze`: shares, percentiles, hops, TTFT, warnings."""

    traces: int
    spans: int
    group_by: str
    e2e: Stats
    ttft: Stats | None
    model_ttft: Stats | None
    groups: tuple[GroupStats, ...]
    hops: tuple[HopStats, ...]
    tokens: TokenStats | None
    warnings: Warnings
    exemplars: dict[str, str]
    breakdowns: tuple[TraceBreakdown, ...]


def iter_prepared(
    traceset: TraceSet, tally: Warnings, stage_map: StageMap | None = None
) -> Iterator[PreparedTrace]:
    """Prepare every trace of ``traceset``; the ones without a root are counted."""
    for trace_id, spans in traceset.traces.items():
        prepared = prepare(trace_id, spans, tally, stage_map)
        if prepared is None:
            tally.skipped_traces += 1
            continue
        yield prepared


def analyze(
    traceset: TraceSet, group_by: str = "stage", stage_map: StageMap | None = None
) -> Analysis:
    """Attribute every trace of ``traceset`` and aggregate.

    Raises:
        ConfigError: an unknown ``group_by``.
        NoUsableDataError: no trace could be analysed.
    """
    if group_by not in GROUP_BY:
        raise ConfigError(f"group_by must be one of {', '.join(GROUP_BY)}, got {group_by!r}")
    tally = Warnings()
    with gc_paused():
        breakdowns = [break_down(t, group_by) for t in iter_prepared(traceset, tally, stage_map)]
        return aggregate(breakdowns, group_by, traceset, tally)


def aggregate(
    breakdowns: list[TraceBreakdown], group_by: str, traceset: TraceSet, tally: Warnings
) -> Analysis:
    """Aggregate per-trace breakdowns (``docs/analysis.md``, aggregation)."""
    warnings = Warnings()
    warnings.merge(traceset.warnings)
    warnings.merge(tally)
    messages = warnings.messages
    # One order whatever the source order or the number of workers: exemplar ties and
    # the JSON come out the same.
    breakdowns = sorted(breakdowns, key=lambda b: (b.start_ns, b.trace_id))
    if not breakdowns:
        reason = messages[0] if messages else "the source holds no spans"
        raise NoUsableDataError(f"no trace could be analysed: {reason}")
    if len(breakdowns) < MIN_TRACES:
        warnings.note(
            f"only {len(breakdowns)} traces: percentiles from fewer than {MIN_TRACES} "
            "samples are rough"
        )
    e2e = np.array([b.e2e_ns for b in breakdowns], dtype=float) / NS_PER_MS
    names = sorted({g for b in breakdowns for g in b.groups})
    col = {g: j for j, g in enumerate(names)}
    matrix = np.zeros((len(breakdowns), len(names)))
    for t, b in enumerate(breakdowns):
        for g, v in b.groups.items():
            matrix[t, col[g]] = v
    matrix /= NS_PER_MS
    tail = e2e >= np.percentile(e2e, 90)
    with_ttft = [b for b in breakdowns if b.ttft_ns is not None and b.ttft_groups is not None]
    ttft_totals: dict[str, float] = {}
    ttft_sum = 0.0
    for b in with_ttft:
        ttft_sum += b.ttft_ns or 0
        for g, v in (b.ttft_groups or {}).items():
            ttft_totals[g] = ttft_totals.get(g, 0.0) + v
    groups = [
        _group_stats(
            g,
            matrix[:, col[g]],
            e2e,
            tail,
            (ttft_totals.get(g, 0.0) / ttft_sum) if ttft_sum > 0 else None,
        )
        for g in names
    ]
    groups.sort(key=lambda s: (-s.share, s.name))
    hop_values: dict[tuple[str, str], list[float]] = {}
    for b in breakdowns:
        for hop, v in b.hops.items():
            hop_values.setdefault(hop, []).append(v / NS_PER_MS)
    hops = []
    for (src, dst), values in hop_values.items():
        st = stats(values)
        hops.append(HopStats(src, dst, st.n, st.mean, st.p50, st.p90))
    hops.sort(key=lambda h: -h.mean_ms)
    token_rows = [b for b in breakdowns if b.input_tokens is not None]
    tokens = None
    if token_rows:
        tokens = TokenStats(
            requests=len(token_rows),
            input_mean=float(np.mean([b.input_tokens or 0 for b in token_rows])),
            output_mean=float(np.mean([b.output_tokens or 0 for b in token_rows])),
            models=tuple(sorted({b.model for b in token_rows if b.model})),
            input_total=sum(b.input_tokens or 0 for b in token_rows),
            output_total=sum(b.output_tokens or 0 for b in token_rows),
        )
    model_ttft_values = [
        b.model_ttft_ns / NS_PER_MS for b in breakdowns if b.model_ttft_ns is not None
    ]
    return Analysis(
        traces=len(breakdowns),
        spans=sum(b.span_count for b in breakdowns),
        group_by=group_by,
        e2e=stats(e2e),
        ttft=stats((b.ttft_ns or 0) / NS_PER_MS for b in with_ttft) if with_ttft else None,
        model_ttft=stats(model_ttft_values) if model_ttft_values else None,
        groups=tuple(groups),
        hops=tuple(hops),
        tokens=tokens,
        warnings=warnings,
        exemplars=_exemplars(breakdowns, e2e),
        breakdowns=tuple(breakdowns),
    )


def _group_stats(
    name: str,
    column_ms: np.ndarray,
    e2e_ms: np.ndarray,
    tail: np.ndarray,
    ttft_share: float | None,
) -> GroupStats:
    """One group's stats from its per-trace times (ms); ``tail`` marks the traces at or
    above the end-to-end P90."""
    p50, p90, p99 = np.percentile(column_ms, [50, 90, 99])
    total, tail_total = e2e_ms.sum(), e2e_ms[tail].sum()
    return GroupStats(
        name=name,
        share=float(column_ms.sum() / total) if total > 0 else 0.0,
        tail_share=float(column_ms[tail].sum() / tail_total) if tail_total > 0 else 0.0,
        ttft_share=ttft_share,
        mean_ms=float(column_ms.mean()),
        p50_ms=float(p50),
        p90_ms=float(p90),
        p99_ms=float(p99),
    )


def selected_group(analysis: Analysis, stage: str) -> GroupStats | None:
    """The stats of ``stage`` with all its sub-stages (``inference`` covers
    ``inference.decode``), summed per trace; None when no trace has any of them."""
    names = {g.name for g in analysis.groups if covers(stage, g.name)}
    if not names:
        return None
    rows = analysis.breakdowns
    e2e = np.array([b.e2e_ns for b in rows], dtype=float) / NS_PER_MS
    column = np.array(
        [sum(v for g, v in b.groups.items() if g in names) for b in rows], dtype=float
    )
    ttft_rows = [b for b in rows if b.ttft_ns is not None and b.ttft_groups is not None]
    ttft_sum = sum(b.ttft_ns or 0 for b in ttft_rows)
    ttft_share = (
        sum(v for b in ttft_rows for g, v in (b.ttft_groups or {}).items() if g in names) / ttft_sum
        if ttft_sum > 0
        else None
    )
    tail = e2e >= np.percentile(e2e, 90)
    return _group_stats(stage, column / NS_PER_MS, e2e, tail, ttft_share)


def _exemplars(breakdowns: list[TraceBreakdown], e2e_ms: np.ndarray) -> dict[str, str]:
    out = {}
    for label, q in (("p50", 50), ("p90", 90)):
        target = np.percentile(e2e_ms, q)
        out[label] = breakdowns[int(np.argmin(np.abs(e2e_ms - target)))].trace_id
    return out
