"""What a sampled trace stands for: its weight (adjusted count), read from its root span.

A trace kept by a consistent probability sampler carries the sampler's threshold in
its spans' trace state (``ot=th:e666``: 10%, weight 1/p = 10;
:mod:`tracer.sampling.threshold`). Other samplers write the probability as an attribute
(``sampling.probability``, 0..1) or a rate (``SampleRate``, 1 in N). A trace without
any of them is full data: weight 1.

A trace's weight cannot be known when its spans disagree or a sampler left a mark
but no threshold: an ``ot`` entry without ``th`` (a parent-based sampler erases the
threshold it finds inconsistent, and a tail sampler keeps traces by what they hold,
not by chance), spans of one trace with different thresholds, or a probability
attribute that is not a number in range. Such a trace counts once (weight 1), and the
analyzer counts and flags it (docs/sampling.md).
"""

from __future__ import annotations

import math
from operator import attrgetter

from tracer import attributes as attrs
from tracer.sampling.threshold import adjusted_count, ot_value, parse_ot
from tracer.spans.model import Span

__all__ = ["FULL", "SAMPLING_KEYS", "trace_weight"]

#: The weight of a trace of full data (known).
FULL = (1.0, True)
_TRACE_STATE = attrgetter("trace_state")
#: The root attributes other samplers write their probability in.
SAMPLING_KEYS = frozenset({attrs.SAMPLING_PROBABILITY, attrs.SAMPLE_RATE})
_UNKNOWN = (1.0, False)


def _threshold(span: Span) -> tuple[bool, int | None]:
    """(whether the span has an ``ot`` entry, its threshold or None)."""
    value = ot_value(span.trace_state)
    if value is None:
        return False, None
    return True, parse_ot(value)[0]


def trace_weight(spans: list[Span], root: Span) -> tuple[float, bool]:
    """``(weight, known)`` of the trace of ``spans`` whose root is ``root`` (see the
    module docstring); an unknown weight is 1."""
    has_ot, th = _threshold(root)
    if has_ot or any(map(_TRACE_STATE, spans)):
        for s in spans:
            if s.trace_state is not None and _threshold(s) != (has_ot, th):
                return _UNKNOWN  # spans of one trace with different thresholds
        if has_ot:
            return (adjusted_count(th), True) if th is not None else _UNKNOWN
    a = root.attributes
    if attrs.SAMPLING_PROBABILITY in a:
        p = a[attrs.SAMPLING_PROBABILITY]
        if _number(p) and 0 < p <= 1:
            return 1.0 / p, True
        return _UNKNOWN
    if attrs.SAMPLE_RATE in a:
        n = a[attrs.SAMPLE_RATE]
        if _number(n) and n >= 1:
            return float(n), True
        return _UNKNOWN
    return FULL


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
