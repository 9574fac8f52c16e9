"""Aggregation over many traces (``docs/analysis.md``, aggregation) and the ``analyze`` pipeline."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from tracer._errors import ConfigError, NoUsableDataError
from tracer.analysis.model.breakdown import GROUP_BY, TraceBreakdown
from tracer.analysis.model.prepare import PreparedTrace, StageMap, prepare
from tracer.analysis.model.substages import covers
from tracer.analysis.model.traceset import TraceSet
from tracer.analysis.sampling._sketch import exact_traces as exact_limit
from tracer.analysis.sampling._sketch import percentiles, sketch_note
from tracer.analysis.sampling._sketch import tail as tail_of
from tracer.analysis.sampling.estimate import quantiles, ratio, weighted_percentiles
from tracer.analysis.sampling.weighted import sample_of, weighted_group
from tracer.analysis.table._memory import gc_paused, trim_freed_memory
from tracer.analysis.table._table import _NONE, Columns, Projected, TraceTable
from tracer.analysis.table.cache import CacheStats, cache_stats
from tracer.analysis.table.figures import GroupStats, HopStats, Sample, Stats, TokenStats
from tracer.analysis.table.schema import SUMMARIES
from tracer.spans.model import Warnings

__all__ = [
    "Analysis",
    "GroupStats",
    "HopStats",
    "Sample",
    "Stats",
    "TokenStats",
    "aggregate",
    "aggregate_table",
    "analyze",
    "iter_prepared",
    "selected_group",
    "stats",
]

NS_PER_MS = 1e6
MIN_TRACES = 10


def stats(
    values_ms: Iterable[float], sketched: bool = False, weights: np.ndarray | None = None
) -> Stats:
    """:class:`Stats` of ``values_ms`` (all zeros for an empty sample); with
    ``sketched``, the percentiles come from a DDSketch (``docs/analysis.md``); with
    ``weights`` (one per value), they are estimates with intervals
    (:mod:`tracer.analysis.sampling.estimate`; exact, never sketched)."""
    if isinstance(values_ms, np.ndarray):  # (fromiter would walk it in Python)
        arr = values_ms.astype(float, copy=False).ravel()
    else:
        arr = np.fromiter(values_ms, dtype=float)
    if arr.size == 0:
        return Stats(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    if weights is not None:
        mean, mean_iv = ratio(weights, arr)
        (p50, i50), (p90, i90), (p99, i99) = quantiles(arr, weights, [50, 90, 99])
        intervals = {"mean": mean_iv, "p50": i50, "p90": i90, "p99": i99}
        return Stats(
            int(arr.size), mean, p50, p90, p99, float(arr.min()), float(arr.max()), intervals
        )
    p50, p90, p99 = percentiles(arr, (50, 90, 99), sketched)
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
class Analysis:
    """The result of :func:`analyze`: shares, percentiles, hops, TTFT, warnings."""

    traces: int
    spans: int
    group_by: str
    #: The figures of each summarised per-trace column over the traces that have a
    #: value, by its summary name (:data:`~tracer.analysis.table.schema.SUMMARIES`:
    #: ``e2e`` always; a column no trace has is left out).
    summaries: Mapping[str, Stats]
    groups: tuple[GroupStats, ...]
    hops: tuple[HopStats, ...]
    tokens: TokenStats | None
    warnings: Warnings
    exemplars: dict[str, str]
    columns: Columns
    #: The loaders' warnings and the traces' (``warnings`` is both, plus notes).
    loaded: Warnings = field(default_factory=Warnings)
    tally: Warnings = field(default_factory=Warnings)
    #: With a ``split_by`` attribute: value -> (traces, including those without a
    #: root, and their warnings).
    split_parts: dict[str, tuple[int, Warnings]] | None = None
    #: True when the percentiles came from the DDSketch (past the exact limit).
    sketched: bool = False
    #: Cached prompt tokens and TTFT by cached fraction (:mod:`tracer.analysis.table.cache`).
    cache: CacheStats | None = None
    #: When the traces are a sample of the traffic (weighted): what they stand for.
    sample: Sample | None = None

    @property
    def e2e(self) -> Stats:
        """End-to-end time, ms."""
        return self.summaries["e2e"]

    @property
    def ttft(self) -> Stats | None:
        """Time to first token as the client sees it, ms (None: no trace has one)."""
        return self.summaries.get("ttft")

    @property
    def model_ttft(self) -> Stats | None:
        """Time to first token inside the model server, ms."""
        return self.summaries.get("model_ttft")

    @property
    def coordinator_ttft(self) -> Stats | None:
        """A prefill/decode coordinator's own time to first token (llm-d's P/D proxy), ms."""
        return self.summaries.get("coordinator_ttft")

    @property
    def breakdowns(self) -> tuple[TraceBreakdown, ...]:
        """Every trace's breakdown, sorted by start time and trace id (built on each
        call from the compact :attr:`columns`)."""
        return tuple(self.columns.breakdowns())


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
    traceset: TraceSet,
    group_by: str = "stage",
    stage_map: StageMap | None = None,
    *,
    split_by: str | None = None,
    projection: Callable[[PreparedTrace], Projected] | None = None,
    exact_traces: int | None = None,
) -> Analysis:
    """Attribute every trace of ``traceset`` and aggregate. With ``split_by``, each
    trace's value of that attribute is kept for :func:`~tracer.analysis.split.split_analysis`;
    with ``projection`` (:class:`~tracer.analysis.whatif.retime.Projection`), its what-if.
    Percentiles are exact up to ``exact_traces`` traces (else ``HOPTRACE_EXACT_TRACES``,
    else ten million), then from a DDSketch to within 1%.

    Raises:
        ConfigError: an unknown ``group_by``.
        NoUsableDataError: no trace could be analysed.
    """
    from tracer.analysis.attribution.attribute import Attributor

    if group_by not in GROUP_BY:
        raise ConfigError(f"group_by must be one of {', '.join(GROUP_BY)}, got {group_by!r}")
    attribute = Attributor(group_by, stage_map, split_by=split_by, projection=projection)
    with gc_paused():
        for seq, (trace_id, spans) in enumerate(traceset.traces.items()):
            attribute(trace_id, spans, seq, 0)
        table = attribute.table
        return aggregate_table(table, group_by, traceset.warnings, table.tally(), exact_traces)


def aggregate(
    breakdowns: Iterable[TraceBreakdown], group_by: str, traceset: TraceSet, tally: Warnings
) -> Analysis:
    """Aggregate per-trace breakdowns (``docs/analysis.md``, aggregation)."""
    table = TraceTable()
    for b in breakdowns:
        table.add(b)
    return aggregate_table(table, group_by, traceset.warnings, tally)


def aggregate_table(
    table: TraceTable,
    group_by: str,
    loaded: Warnings,
    tally: Warnings,
    exact_traces: int | None = None,
) -> Analysis:
    """Aggregate the rows of ``table``, which gives them up (only its :meth:`~TraceTable.tally`
    stays); ``loaded`` are the loaders' warnings, ``tally`` the analyzer's (in that
    order in the result). Percentiles are exact up to
    ``exact_traces`` traces (:func:`~tracer.analysis.sampling._sketch.exact_traces`), then
    sketched."""
    # One order whatever the source order or the number of workers: exemplar ties and
    # the JSON come out the same. The table gives its rows up to the columns as they
    # are copied: held once, not twice, at the largest moment of the analysis.
    trim_freed_memory(now=True)  # what reading freed, before the largest allocations
    cols = table.columns(release=True)
    parts = None
    if cols.split is not None:
        counts = np.bincount(cols.split, minlength=len(cols.strings))
        found = {cols.strings[v]: int(counts[v]) for v in np.unique(cols.split).tolist()}
        for value, k in table.unrooted().items():
            found[value] = found.get(value, 0) + k
        parts = {str(v): (k, table.tally(v)) for v, k in found.items()}
    return aggregate_columns(cols, group_by, loaded, tally, parts, exact_traces)


def aggregate_columns(
    cols: Columns,
    group_by: str,
    loaded: Warnings,
    tally: Warnings,
    split_parts: dict[str, tuple[int, Warnings]] | None = None,
    exact_traces: int | None = None,
) -> Analysis:
    """Aggregate ``cols`` (see :func:`aggregate_table`).

    Raises:
        NoUsableDataError: no rows.
        ConfigError: a bad ``exact_traces`` (or ``HOPTRACE_EXACT_TRACES``).
    """
    warnings = Warnings()
    warnings.merge(loaded)
    warnings.merge(tally)
    messages = warnings.messages
    n = len(cols)
    if not n:
        reason = messages[0] if messages else "the source holds no spans"
        raise NoUsableDataError(f"no trace could be analysed: {reason}")
    if n < MIN_TRACES:
        warnings.note(
            f"only {n} traces: percentiles from fewer than {MIN_TRACES} samples are rough"
        )
    w = cols.weight  # None: full data, every weight 1
    sample = None
    if w is not None or cols.weight_unknown is not None:
        sample = sample_of(cols, warnings)
        if w is None:  # no weight but 1: the figures are those of full data
            sample = None
    limit = exact_limit(exact_traces)
    sketched = n > limit and w is None
    if sketched:
        warnings.note(sketch_note(limit))
    e2e = np.divide(cols.e2e_ns, NS_PER_MS)  # (as astype(float) / NS_PER_MS, one array)
    _, keys, values = cols.group_entries
    present = sorted(_first_use(keys), key=lambda k: cols.group_names[k])
    if w is None:
        tail = tail_of(e2e, sketched)
    else:
        tail = e2e >= weighted_percentiles(e2e, w, [90])[0]
    with_ttft = cols.ttft_ns != _NONE
    _, t_keys, t_values = cols.ttft_entries
    t_rows = None if w is None else cols.ttft_groups[0]
    ttft_sum = int(cols.ttft_ns[with_ttft].sum())
    groups = []
    ends = cols.group_entries.ends
    for k in present:
        if w is None:
            exact_ttft = int(t_values[t_keys == k].sum())
            ttft: float | tuple[np.ndarray, np.ndarray] | None = (
                (exact_ttft / ttft_sum) if ttft_sum > 0 else None
            )
        else:
            assert t_rows is not None
            ttft_column = np.zeros(n)
            ttft_column[t_rows[t_keys == k]] = t_values[t_keys == k]
            ttft = (ttft_column, np.where(with_ttft, cols.ttft_ns, 0)) if ttft_sum > 0 else None
        column = _group_column(ends, keys, values, k)
        groups.append(_group_stats(cols.group_names[k], column, e2e, tail, ttft, sketched, w))
        del column  # (not held while the next one is made)
    del t_rows
    groups.sort(key=lambda s: (-s.share, s.name))
    _, h_keys, h_values = cols.hop_entries
    h_rows = None if w is None else cols.hops[0]
    hops = []
    for k in _first_use(h_keys):
        mine = h_keys == k
        hop_w = None if w is None or h_rows is None else w[h_rows[mine]]
        st = stats(h_values[mine] / NS_PER_MS, sketched, hop_w)
        src, dst = cols.hop_names[k]
        hop_iv = None if st.intervals is None else {f"{q}_ms": st.intervals[q] for q in _HOP_KEYS}
        hops.append(HopStats(src, dst, st.n, st.mean, st.p50, st.p90, hop_iv))
    hops.sort(key=lambda h: -h.mean_ms)
    del tail
    # Each summarised column's figures over the rows that have it (every row has an
    # end-to-end time, already in ms above).
    summaries: dict[str, Stats] = {}
    for c in SUMMARIES:
        if c.name == "e2e_ns":
            figures: Stats | None = stats(e2e, sketched, w)
        else:
            figures = _stats_where_set(cols.column(c), sketched, w, c.scale)
        if figures is not None:
            summaries[c.summary] = figures
    return Analysis(
        traces=n,
        spans=int(cols.span_count.sum()),
        group_by=group_by,
        summaries=summaries,
        groups=tuple(groups),
        hops=tuple(hops),
        tokens=_tokens(cols, w),
        warnings=warnings,
        exemplars=_exemplars(cols, e2e, sketched),
        columns=cols,
        loaded=loaded,
        tally=tally,
        split_parts=split_parts,
        sketched=sketched,
        cache=cache_stats(cols),
        sample=sample,
    )


def _group_column(ends: np.ndarray, keys: np.ndarray, values: np.ndarray, k: int) -> np.ndarray:
    """Each row's time (ms) in name ``k`` of sparse rows (``ends``, ``keys``, ``values``),
    0 where it has none."""
    at = np.flatnonzero(keys == k)
    column = np.zeros(ends.size)
    column[np.searchsorted(ends, at, side="right")] = values[at]  # (the rows of at)
    column /= NS_PER_MS
    return column


def _stats_where_set(
    column: np.ndarray | None, sketched: bool, w: np.ndarray | None, scale: float = NS_PER_MS
) -> Stats | None:
    """:func:`stats` of the rows where ``column`` is set, in its units over ``scale``
    (ns to ms); None when no row is (or the column is left out: every row has its usual
    value, which is not worth a figure)."""
    if column is None:
        return None
    mine = column != _NONE
    if not mine.any():
        return None
    return stats(column[mine] / scale, sketched, None if w is None else w[mine])


def _tokens(cols: Columns, w: np.ndarray | None) -> TokenStats | None:
    """Token counts of the rows that have them; None when none has."""
    has_tokens = cols.input_tokens != _NONE
    if not has_tokens.any():
        return None
    tin, tout = cols.input_tokens[has_tokens], cols.output_tokens[has_tokens]
    models = {cols.strings[m] for m in np.unique(cols.model[has_tokens]).tolist()}
    tw = None if w is None else w[has_tokens]
    means = None if tw is None else {"input_mean": ratio(tw, tin), "output_mean": ratio(tw, tout)}
    return TokenStats(
        requests=int(has_tokens.sum()),
        input_mean=float(np.mean(tin)) if means is None else means["input_mean"][0],
        output_mean=float(np.mean(tout)) if means is None else means["output_mean"][0],
        models=tuple(sorted(m for m in models if m)),
        input_total=int(tin.sum()) if tw is None else round(float(np.dot(tw, tin))),
        output_total=int(tout.sum()) if tw is None else round(float(np.dot(tw, tout))),
        intervals=None if means is None else {k: v[1] for k, v in means.items()},
    )


_HOP_KEYS = ("mean", "p50", "p90")


def _group_stats(
    name: str,
    column_ms: np.ndarray,
    e2e_ms: np.ndarray,
    tail: np.ndarray,
    ttft_share: float | tuple[np.ndarray, np.ndarray] | None,
    sketched: bool = False,
    weights: np.ndarray | None = None,
) -> GroupStats:
    """One group's stats from its per-trace times (ms); ``tail`` marks the traces at or
    above the end-to-end P90. With ``weights``, estimates with intervals, and
    ``ttft_share`` is (the group's time before the first token, the time to first
    token) per trace."""
    if weights is not None:
        return weighted_group(name, column_ms, e2e_ms, tail, ttft_share, weights)
    assert not isinstance(ttft_share, tuple)
    p50, p90, p99 = percentiles(column_ms, (50, 90, 99), sketched)
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
    cols = analysis.columns
    n = len(cols)
    wanted = np.array([g in names for g in cols.group_names] or [False])
    e2e = cols.e2e_ns.astype(float) / NS_PER_MS
    rows, keys, values = cols.groups
    mine = wanted[keys]
    column = np.bincount(rows[mine], weights=values[mine], minlength=n).astype(float)
    t_rows, t_keys, t_values = cols.ttft_groups
    ttft_sum = int(cols.ttft_ns[cols.ttft_ns != _NONE].sum())
    ttft_share = int(t_values[wanted[t_keys]].sum()) / ttft_sum if ttft_sum > 0 else None
    sketched = analysis.sketched
    w = cols.weight
    if w is not None:
        tail = e2e >= weighted_percentiles(e2e, w, [90])[0]
        ttft_column = np.bincount(
            t_rows[wanted[t_keys]], weights=t_values[wanted[t_keys]], minlength=n
        )
        ttft_pair = (ttft_column, np.where(cols.ttft_ns != _NONE, cols.ttft_ns, 0))
        ttft = ttft_pair if ttft_sum > 0 else None
        return _group_stats(stage, column / NS_PER_MS, e2e, tail, ttft, sketched, w)
    tail = tail_of(e2e, sketched)
    return _group_stats(stage, column / NS_PER_MS, e2e, tail, ttft_share, sketched)


def _first_use(keys: np.ndarray, chunk: int = 1 << 20) -> list[int]:
    """The distinct values of ``keys`` in order of first appearance, a chunk at a time
    (no sort or int64 copy of the whole array)."""
    first: dict[int, int] = {}
    for lo in range(0, keys.size, chunk):
        values, at = np.unique(keys[lo : lo + chunk], return_index=True)
        for v, i in zip(values.tolist(), at.tolist(), strict=True):
            first.setdefault(v, lo + i)
    return sorted(first, key=first.__getitem__)


def _exemplars(cols: Columns, e2e_ms: np.ndarray, sketched: bool) -> dict[str, str]:
    out = {}
    for label, q in (("p50", 50), ("p90", 90)):
        if cols.weight is not None:
            target = weighted_percentiles(e2e_ms, cols.weight, [q])[0]
        else:
            target = percentiles(e2e_ms, (q,), sketched)[0]
        out[label] = str(cols.ids[int(np.argmin(np.abs(e2e_ms - target)))])
    return out
