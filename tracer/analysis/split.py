"""``--split-by ATTRIBUTE``: the same breakdown for each value of an attribute.

A trace's value is the one on its earliest span that carries the attribute (a model
name, a route, a fallback tier); traces without it form the group ``(none)``. Each
part is analysed on its own, so shares, percentiles, what-if and budgets are per value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from tracer._errors import ConfigError
from tracer.analysis.attribution.attribute import NONE, split_value
from tracer.analysis.model.traceset import TraceSet
from tracer.spans.model import Span

if TYPE_CHECKING:
    from tracer.analysis.aggregate import Analysis
    from tracer.analysis.table._table import Columns
    from tracer.analysis.whatif.retime import Projection, WhatIf
    from tracer.spans.model import Warnings

__all__ = [
    "NONE",
    "Split",
    "split_aggregate",
    "split_analysis",
    "split_by",
    "split_traces",
    "split_value",
    "split_whatif",
]

R = TypeVar("R")


def split_traces(traceset: TraceSet, attribute: str) -> list[tuple[str, TraceSet]]:
    """The traces grouped by their value of ``attribute``, most traces first (ties by
    value); every part keeps the source's warnings.

    Raises:
        ConfigError: no trace carries the attribute.
    """
    parts: dict[str, dict[str, list[Span]]] = {}
    for trace_id, spans in traceset.traces.items():
        parts.setdefault(split_value(spans, attribute), {})[trace_id] = spans
    if set(parts) <= {NONE}:
        _no_value(attribute)
    ordered = sorted(parts.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return [(value, TraceSet(traces, traceset.warnings)) for value, traces in ordered]


@dataclass(frozen=True)
class Split(Generic[R]):
    """One result per value of ``attribute``: (value, trace count, result)."""

    attribute: str
    parts: tuple[tuple[str, int, R], ...]


def split_by(traceset: TraceSet, attribute: str, run: Callable[[TraceSet], R]) -> Split[R]:
    """``run`` on the traces of each value of ``attribute``.

    Raises:
        ConfigError: no trace carries the attribute; and whatever ``run`` raises.
    """
    return Split(
        attribute,
        tuple(
            (value, len(part.traces), run(part))
            for value, part in split_traces(traceset, attribute)
        ),
    )


def split_analysis(
    analysis: Analysis, attribute: str, run: Callable[[Columns, Warnings, Warnings], R]
) -> Split[R]:
    """``run`` on the rows of each value of ``attribute``, from an analysis attributed
    with ``split_by=attribute`` (in one pass; no spans kept). ``run`` gets the value's
    rows, the loaders' warnings and its traces'; the values come in the order of
    :func:`split_traces`, and the results equal :func:`split_by`'s.

    Raises:
        ConfigError: no trace carries the attribute; and whatever ``run`` raises.
        ValueError: ``analysis`` was attributed without ``split_by``.
    """
    parts = analysis.split_parts
    if parts is None:
        raise ValueError("the analysis was attributed without split_by")
    if set(parts) <= {NONE}:
        _no_value(attribute)
    cols = analysis.columns
    assert cols.split is not None
    out = []
    for value, (count, tally) in sorted(parts.items(), key=lambda kv: (-kv[1][0], kv[0])):
        index = cols.strings.index(value) if value in cols.strings else -2
        out.append((value, count, run(cols.subset(cols.split == index), analysis.loaded, tally)))
    return Split(attribute, tuple(out))


def split_aggregate(analysis: Analysis, attribute: str, group_by: str) -> Split[Analysis]:
    """Each value's analysis by ``group_by``, from an analysis attributed with
    ``split_by=attribute`` (as :func:`split_analysis`)."""
    from tracer.analysis.aggregate import aggregate_columns

    return split_analysis(
        analysis,
        attribute,
        lambda cols, loaded, tally: aggregate_columns(cols, group_by, loaded, tally),
    )


def split_whatif(analysis: Analysis, attribute: str, projection: Projection) -> Split[WhatIf | str]:
    """Each value's what-if, from an analysis attributed with ``split_by=attribute`` and
    ``projection``; a value whose traces cannot be projected (none of them passes
    through the stage) gets the reason instead."""
    from tracer._errors import NoUsableDataError

    def one(cols: Columns, loaded: Warnings, tally: Warnings) -> WhatIf | str:
        try:
            return projection.result(cols, loaded, tally)
        except (ConfigError, NoUsableDataError) as exc:
            return str(exc)

    return split_analysis(analysis, attribute, one)


def _no_value(attribute: str) -> None:
    raise ConfigError(
        f"no trace carries the attribute {attribute!r} given to --split-by; for example "
        "gen_ai.request.model, or hoptrace.fallback_tier in the demo's traces"
    )
