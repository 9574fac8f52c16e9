"""``--split-by ATTRIBUTE``: the same breakdown for each value of an attribute.

A trace's value is the one on its earliest span that carries the attribute (a model
name, a route, a fallback tier); traces without it form the group ``(none)``. Each
part is analysed on its own, so shares, percentiles, what-if and budgets are per value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from tracer._errors import ConfigError
from tracer.analysis.traceset import TraceSet
from tracer.spans.model import Span

__all__ = ["NONE", "Split", "split_by", "split_traces"]

#: The value of traces that do not carry the attribute.
NONE = "(none)"
R = TypeVar("R")


def _value(spans: list[Span], attribute: str) -> str:
    best: Span | None = None
    for s in spans:
        if attribute in s.attributes and (best is None or s.start_ns < best.start_ns):
            best = s
    if best is None:
        return NONE
    value = best.attributes[attribute]
    return str(value) if not isinstance(value, list) else ",".join(map(str, value))


def split_traces(traceset: TraceSet, attribute: str) -> list[tuple[str, TraceSet]]:
    """The traces grouped by their value of ``attribute``, most traces first (ties by
    value); every part keeps the source's warnings.

    Raises:
        ConfigError: no trace carries the attribute.
    """
    parts: dict[str, dict[str, list[Span]]] = {}
    for trace_id, spans in traceset.traces.items():
        parts.setdefault(_value(spans, attribute), {})[trace_id] = spans
    if set(parts) <= {NONE}:
        raise ConfigError(
            f"no trace carries the attribute {attribute!r} given to --split-by; for example "
            "gen_ai.request.model, or hoptrace.fallback_tier in the demo's traces"
        )
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
