"""The numbers the analysis converts, checked once where spans come in.

Times become 64-bit integers in the analysis' arrays and engine latencies become
nanoseconds, so a value out of range would end every later look at the data in an
``OverflowError``. The keys come from the registry of serving engines and naming schemes
(:mod:`tracer.engines`). These rules say which values are usable:

- times (start, end, first-token mark, Triton's phase events): Unix nanoseconds from
  1970-01-01 up to, not including, 2200-01-01 (:data:`TIME_LIMIT_NS`). The 62 years
  left before int64's end (2262) keep sums and differences of times inside 64 bits.
- engine latencies in seconds (``gen_ai.latency.*``), in milliseconds (llm-d's proxy)
  and TGI's durations (``"3.9ms"``): finite and at most :data:`MAX_SECONDS`.
  (``gen_ai.response.time_to_first_chunk`` is read as a first-token mark only when it
  is under a day, so it needs no rule.)
- token counts (``gen_ai.usage.*`` and their older names): a finite number of at most
  :data:`MAX_TOKENS` in size.

The collector refuses a span that breaks a rule (OTLP partial success, with the reason);
the loaders drop the span (a bad time) or the attribute (a bad number) and count it in
the warnings (:func:`checked`), so a store or file holding such a value is still read.
"""

from __future__ import annotations

import math
import re
from typing import Any

from tracer import engines
from tracer.spans.model import Span, Warnings

__all__ = [
    "MAX_MILLISECONDS",
    "MAX_SECONDS",
    "MAX_TOKENS",
    "NUMBER_BOUNDS",
    "NUMERIC_KEYS",
    "TIME_LIMIT_NS",
    "attribute_problem",
    "checked",
    "needs_check",
    "rust_duration_ns",
    "seconds_ns",
    "span_number_problem",
    "time_ok",
    "token_count",
]

#: 2200-01-01T00:00:00Z in Unix nanoseconds: the first time that is not accepted.
TIME_LIMIT_NS = 7_258_118_400 * 10**9
#: The largest engine latency, in seconds (about 31 years).
MAX_SECONDS = 1e9
#: The largest token count of one span.
MAX_TOKENS = 10**12

#: The largest engine latency in milliseconds (:data:`MAX_SECONDS`).
MAX_MILLISECONDS = MAX_SECONDS * 1000

_SECONDS_KEYS = engines.SECONDS_KEYS
_MILLISECONDS_KEYS = engines.MILLISECONDS_KEYS
_TOKEN_KEYS = engines.TOKEN_COUNT_KEYS
_DURATION_KEYS = engines.DURATION_KEYS
_EVENT_KEYS = tuple(map(engines.event_key, sorted(engines.PHASE_EVENTS)))
#: Every attribute key whose value the analysis turns into a number.
NUMERIC_KEYS = frozenset(
    _SECONDS_KEYS + _MILLISECONDS_KEYS + _TOKEN_KEYS + _DURATION_KEYS + _EVENT_KEYS
)
_KIND = {
    **dict.fromkeys(_SECONDS_KEYS, "seconds"),
    **dict.fromkeys(_MILLISECONDS_KEYS, "milliseconds"),
    **dict.fromkeys(_TOKEN_KEYS, "tokens"),
    **dict.fromkeys(_DURATION_KEYS, "duration"),
    **dict.fromkeys(_EVENT_KEYS, "time"),
}
#: For the keys of latencies and token counts: an int or float value within plus or
#: minus this bound is one :func:`attribute_problem` accepts (a decoder's check without
#: a call).
NUMBER_BOUNDS: dict[str, float] = {
    **dict.fromkeys(_SECONDS_KEYS, MAX_SECONDS),
    **dict.fromkeys(_MILLISECONDS_KEYS, MAX_MILLISECONDS),
    **dict.fromkeys(_TOKEN_KEYS, MAX_TOKENS),
}
_RUST_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ns|µs|μs|us|ms|s)\s*$")
_UNIT_NS = {"ns": 1, "µs": 1_000, "μs": 1_000, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


def time_ok(value: object) -> bool:
    """True for an int of Unix nanoseconds from 1970 up to :data:`TIME_LIMIT_NS`."""
    return type(value) is int and 0 <= value < TIME_LIMIT_NS


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def seconds_ns(value: object) -> int | None:
    """Nanoseconds in a latency attribute of non-negative seconds; None for anything else
    (not a number, negative, not finite, past :data:`MAX_SECONDS`)."""
    kind = type(value)
    if kind is float or kind is int or (kind is not bool and _is_number(value)):
        if 0 <= value <= MAX_SECONDS:  # type: ignore[operator]
            return int(round(value * 1e9))  # type: ignore[operator]
    return None


def rust_duration_ns(value: object) -> int | None:
    """Nanoseconds in a Rust ``Duration`` as ``{:?}`` prints it (``12.3ms``, ``850µs``,
    ``1.2s``); None for anything else, or past :data:`MAX_SECONDS`."""
    if not isinstance(value, str):
        return None
    match = _RUST_DURATION.match(value)
    if match is None:
        return None
    ns = float(match.group(1)) * _UNIT_NS[match.group(2)]
    return int(round(ns)) if ns <= MAX_SECONDS * 1e9 else None


#: An integer as int() reads one: a sign at most once, decimal digits, spaces around.
_INTEGER_TEXT = re.compile(r"\s*[+-]?\d+\s*")


def _token_text_out_of_range(value: str) -> bool:
    """Whether a token count written as text is an integer that token_count() drops for
    its size: read by int() as token_count() reads it (other text is no number, and is
    ignored); past 20 characters, any integer (it is not converted: that is slow)."""
    if len(value) > 20:
        return _INTEGER_TEXT.fullmatch(value) is not None
    try:
        return abs(int(value)) > MAX_TOKENS
    except ValueError:
        return False


def token_count(value: object) -> int:
    """A token count as an int: 0 for a value that is not one (text, not finite, past
    :data:`MAX_TOKENS`)."""
    if type(value) is int:
        return value if -MAX_TOKENS <= value <= MAX_TOKENS else 0
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and abs(value) <= MAX_TOKENS else 0
    if isinstance(value, str) and len(value) <= 20:
        try:
            n = int(value)
        except ValueError:
            return 0
        return n if -MAX_TOKENS <= n <= MAX_TOKENS else 0
    return 0


def attribute_problem(key: str, value: Any) -> str | None:
    """Why the value of attribute ``key`` (one of :data:`NUMERIC_KEYS`) cannot be used
    as a number, or None when it can (or is not meant as one: text is ignored)."""
    kind = _KIND.get(key)
    if kind is None or isinstance(value, bool):
        return None
    if kind == "seconds" or kind == "milliseconds":
        bound = MAX_SECONDS if kind == "seconds" else MAX_MILLISECONDS
        if _is_number(value) and not (math.isfinite(value) and abs(value) <= bound):
            return f"{key} is not a finite number of {kind} up to {bound:.0e}"
    elif kind == "tokens":
        if _is_number(value) and not (math.isfinite(value) and abs(value) <= MAX_TOKENS):
            return f"{key} is not a finite token count up to {MAX_TOKENS:.0e}"
        if isinstance(value, str) and _token_text_out_of_range(value):
            return f"{key} is not a finite token count up to {MAX_TOKENS:.0e}"
    elif kind == "duration":
        if isinstance(value, str) and _RUST_DURATION.match(value):
            if rust_duration_ns(value) is None:
                return f"{key} is longer than {MAX_SECONDS:.0e} seconds"
    elif type(value) is int and not 0 <= value < TIME_LIMIT_NS:
        return f"{key} is not a time between 1970 and 2200"
    return None


_TIME_FIELDS = (("start_ns", "start time"), ("end_ns", "end time"))


def span_number_problem(span: Span) -> tuple[str, object] | None:
    """Why a span holds a number the analysis cannot use, with the value; None when
    every time, latency and token count is usable."""
    for name, label in _TIME_FIELDS:
        value = getattr(span, name)
        if not 0 <= value < TIME_LIMIT_NS:
            return f"{label} is not between 1970 and 2200 (Unix nanoseconds)", value
    first = span.first_token_ns
    if first is not None and not 0 <= first < TIME_LIMIT_NS:
        return "first-token time is not between 1970 and 2200 (Unix nanoseconds)", first
    attributes = span.attributes
    if attributes and not NUMERIC_KEYS.isdisjoint(attributes):
        for key in NUMERIC_KEYS.intersection(attributes):
            problem = attribute_problem(key, attributes[key])
            if problem is not None:
                return problem, attributes[key]
    return None


def checked(span: Span, warnings: Warnings) -> Span | None:
    """``span`` as the analysis may use it: None for a time out of range (counted as a
    skipped span), else the span, without a first-token mark or numeric attribute that
    is out of range (each noted in ``warnings``)."""
    if not (0 <= span.start_ns < TIME_LIMIT_NS and 0 <= span.end_ns < TIME_LIMIT_NS):
        warnings.skip("spans with times outside 1970..2200 were skipped")
        return None
    first = span.first_token_ns
    if first is not None and not 0 <= first < TIME_LIMIT_NS:
        span.first_token_ns = None
        warnings.dropped_values += 1
        warnings.note("first-token times outside 1970..2200 were dropped")
    attributes = span.attributes
    if attributes and not NUMERIC_KEYS.isdisjoint(attributes):
        for key in NUMERIC_KEYS.intersection(attributes):
            problem = attribute_problem(key, attributes[key])
            if problem is not None:
                span.attributes = attributes = {k: v for k, v in attributes.items() if k != key}
                warnings.dropped_values += 1
                warnings.note(f"attributes dropped: {problem}")
    return span


def needs_check(span: Span) -> bool:
    """False when :func:`checked` would return ``span`` as it is, by the quick tests."""
    first = span.first_token_ns
    return not (
        0 <= span.start_ns < TIME_LIMIT_NS
        and 0 <= span.end_ns < TIME_LIMIT_NS
        and (first is None or 0 <= first < TIME_LIMIT_NS)
        and (not span.attributes or NUMERIC_KEYS.isdisjoint(span.attributes))
    )
