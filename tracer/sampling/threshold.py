"""The OpenTelemetry sampling threshold in the W3C trace state (``ot=th:...;rv:...``).

Consistent probability sampling (opentelemetry-specification
``specification/trace/tracestate-probability-sampling.md`` and
``specification/trace/tracestate-handling.md``; OTEP 235,
``oteps/trace/0235-sampling-threshold-in-trace-state.md``) keeps a span when its 56-bit
randomness ``R`` (the ``rv`` sub-key, else the trace id's last 56 bits) is at or above
the rejection threshold ``T``; ``T`` travels as ``th``, hexadecimal with its trailing
zeros removed (``th:e666`` is 10%, ``th:0`` is 100%). A kept span stands for
``2**56 / (2**56 - T)`` spans of the traffic: its adjusted count.

The sampler (:mod:`tracer.sampling.samplers`) and the analyzer both read this module; it
imports nothing.
"""

from __future__ import annotations

import math

__all__ = [
    "MAX_THRESHOLD",
    "OT_KEY",
    "PRECISION",
    "adjusted_count",
    "encode_threshold",
    "ot_value",
    "parse_ot",
    "parse_tracestate_threshold",
    "probability_to_threshold",
    "with_ot_value",
]

#: 2**56: the threshold of a probability of zero, one past the largest randomness.
MAX_THRESHOLD = 1 << 56
#: The trace-state key OpenTelemetry writes its sampling sub-keys under.
OT_KEY = "ot"
#: Hexadecimal digits of a threshold, as the specification recommends SDKs use.
PRECISION = 4
_DIGITS = 14  # 56 bits


def probability_to_threshold(probability: float, precision: int = PRECISION) -> int:
    """The rejection threshold of ``probability`` (2**-56..1) rounded to ``precision``
    significant hexadecimal digits, as the specification's reference function
    computes it (the precision counts past the leading ``f`` digits of small
    probabilities).

    Raises:
        ValueError: a probability outside 2**-56..1 or a precision outside 1..13.
    """
    if not 2.0**-56 <= probability <= 1.0:
        raise ValueError(f"probability must be in 2**-56..1, got {probability!r}")
    if not 1 <= precision <= 13:
        raise ValueError(f"precision must be in 1..13, got {precision!r}")
    if probability == 1.0:
        return 0
    _, exp = math.frexp(probability)
    precision = max(1, min(12, precision + exp // -4))
    rejection = 2.0 - probability + math.ldexp(0.5, -4 * precision)
    digits = "fffffffffffff" if rejection >= 2.0 else rejection.hex()[4:][:-3]
    kept = digits[:precision]
    return int(kept, 16) << (4 * (_DIGITS - len(kept)))


def encode_threshold(threshold: int) -> str:
    """``th``'s text for ``threshold``: hexadecimal, trailing zeros removed (``0`` for
    zero, 100%)."""
    if threshold == 0:
        return "0"
    return f"{threshold:014x}".rstrip("0")


def adjusted_count(threshold: int) -> float:
    """How many spans of the traffic a span kept at ``threshold`` stands for."""
    return MAX_THRESHOLD / (MAX_THRESHOLD - threshold)


def _hex56(text: str, exact: bool) -> int | None:
    if not text or len(text) > _DIGITS or (exact and len(text) != _DIGITS):
        return None
    if not all(c in "0123456789abcdef" for c in text):
        return None
    return int(text, 16) << (4 * (_DIGITS - len(text)))


def parse_ot(value: str) -> tuple[int | None, int | None]:
    """``(threshold, randomness)`` of an ``ot`` trace-state value (``th:e666;rv:...``),
    None for a sub-key that is absent or malformed."""
    threshold = randomness = None
    for member in value.split(";"):
        if member.startswith("th:"):
            threshold = _hex56(member[3:], exact=False)
        elif member.startswith("rv:"):
            randomness = _hex56(member[3:], exact=True)
    return threshold, randomness


def ot_value(tracestate: str | None) -> str | None:
    """The ``ot`` member's value of a W3C ``tracestate`` text (``a=1,ot=th:8``), or None."""
    if not tracestate or "ot=" not in tracestate:
        return None
    for member in tracestate.split(","):
        key, sep, value = member.strip().partition("=")
        if sep and key == OT_KEY:
            return value
    return None


def parse_tracestate_threshold(tracestate: str | None) -> int | None:
    """The ``th`` threshold a W3C ``tracestate`` text carries, or None."""
    value = ot_value(tracestate)
    return None if value is None else parse_ot(value)[0]


def with_ot_value(value: str, threshold: int | None) -> str:
    """An ``ot`` value with its ``th`` set to ``threshold`` (removed for None), the
    other sub-keys kept in their order."""
    kept = [m for m in value.split(";") if m and not m.startswith("th:")]
    if threshold is not None:
        kept.insert(0, f"th:{encode_threshold(threshold)}")
    return ";".join(kept)
