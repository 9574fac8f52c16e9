"""A serving engine's request span split into its phases: queue, prefill, decode.

How an engine's request span places its phases is the engine's own knowledge, in its
module (:mod:`tracer.engines`: ``Convention.intervals``; vLLM's and SGLang's around
the first token, TGI's after validation, Triton's between two events, llm-d's one
after the other). Here each engine of the registry reads the span it applies to (one
that carries a key it reads): the span's times corrected for clock skew, its latency
attributes converted by the unit the registry lists them under, its phase events'
times. Every interval is clipped to the span S; a missing value means no interval.
The analyzer adds the intervals as children of S, so they take part in the
critical-path walk and in what-if retiming like spans; what is left of S is its own
``inference`` time.
"""

from __future__ import annotations

from collections.abc import Callable

from tracer import engines
from tracer.engines.convention import Interval
from tracer.spans._numbers import TIME_LIMIT_NS, rust_duration_ns, seconds_ns
from tracer.spans.model import Span

__all__ = [
    "CHILD_SPANS",
    "COORDINATOR_KEYS",
    "PHASE_KEYS",
    "coordinator_ttft_ns",
    "engine_intervals",
    "rust_duration_ns",
]

#: The attributes whose values :func:`engine_intervals` reads (the batches read them
#: per trace, through it, rather than keying a shape on them): the engines' phase keys
#: (:mod:`tracer.engines`).
PHASE_KEYS = engines.PHASE_KEYS
#: The attributes whose values :func:`coordinator_ttft_ns` reads (the batches read them
#: per trace, through it).
COORDINATOR_KEYS = engines.COORDINATOR_KEYS
#: The names of the request spans' children whose start the phases read.
CHILD_SPANS = engines.CHILD_SPANS


def _ms_ns(value: object) -> int | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return seconds_ns(value / 1000)
    return None


_CONVERT: dict[str, Callable[[object], int | None]] = {
    "seconds": seconds_ns,
    "milliseconds": _ms_ns,
    "duration": rust_duration_ns,
}
#: How each latency key the registry lists is read, by its unit.
_READ = {key: _CONVERT[unit] for key, unit in engines.UNITS.items()}
_EVENT = {name: engines.event_key(name) for name in engines.PHASE_EVENTS}


class _Request:
    """An engine request span as an engine's ``intervals`` reads it
    (:class:`tracer.engines.Request`)."""

    __slots__ = ("_get", "_shift", "child_start_ns", "end_ns", "first_token_ns", "start_ns")

    def __init__(self, span: Span, start_ns: int, end_ns: int, child_start_ns: int | None):
        self._get = span.attributes.get
        self._shift = shift = start_ns - span.start_ns  # the clock correction of the span
        self.start_ns, self.end_ns, self.child_start_ns = start_ns, end_ns, child_start_ns
        first = span.first_token_ns
        self.first_token_ns = None if first is None else first + shift

    def latency_ns(self, key: str) -> int | None:
        return _READ[key](self._get(key))

    def event_ns(self, name: str) -> int | None:
        at = self._get(_EVENT[name])
        if type(at) is int and 0 <= at < TIME_LIMIT_NS:
            return at + self._shift
        return None


def coordinator_ttft_ns(span: Span) -> int | None:
    """The time to first token a P/D coordinator (llm-d's proxy) measured, ns from its
    span's start; None when the span has none."""
    get = span.attributes.get
    for key in engines.COORDINATOR_ORDER:
        found = _READ[key](get(key))
        if found is not None:
            return found
    return None


def engine_intervals(
    span: Span, start_ns: int, end_ns: int, child_start_ns: int | None = None
) -> list[Interval]:
    """(sub-stage, start, end) intervals of an engine request span whose (skew-corrected)
    interval is [start_ns, end_ns]; empty when the span reports none.

    ``child_start_ns`` is the (corrected) start of its child span an engine reads
    (Triton's ``compute``, which carries ``COMPUTE_START`` when the model span does not).
    """
    attributes = span.attributes
    request = None
    out = []
    for intervals, keys in engines.INTERVALS:
        for key in keys:
            if key in attributes:
                break
        else:
            continue  # none of its keys: not this engine's span
        if request is None:
            request = _Request(span, start_ns, end_ns, child_start_ns)
        for stage, lo, hi in intervals(request):  # type: ignore[misc]
            lo, hi = max(lo, start_ns), min(hi, end_ns)
            if hi > lo:
                out.append((stage, lo, hi))
    return out
