"""What the collector will not store, span by span, and the reasons it gives.

Checked before the write transaction, so one span that can never be stored is
rejected alone (OTLP partial success, with the reason) and the rest of its batch, and
every batch committed with it, is stored. The rules are the same for OTLP protobuf
and OTLP JSON:

- ids: a trace id of 16 bytes (32 hex digits in JSON), a span id of 8 bytes (16 hex
  digits), neither all zero; a parent span id empty or of 8 bytes and not all zero. In
  JSON an id is hex, or base64 of the raw bytes as protobuf's generic JSON mapping
  writes it.
- times: start, end and first-token times lie between 1970 and 2200 (Unix
  nanoseconds below :data:`tracer.spans._numbers.TIME_LIMIT_NS`; OTLP's ``fixed64``
  allows more, which no clock gives and the analysis cannot add up).
- numbers the analysis converts: engine latencies in seconds (``gen_ai.latency.*``)
  are finite and at most 1e9, token counts finite and at most 1e12 (see
  :mod:`tracer.spans._numbers`); kind, status code and every other integer attribute
  value fit in a signed 64-bit integer (SQLite stores no wider integer).
- nesting: an attribute value (array or key-value list) nests at most
  :data:`MAX_VALUE_DEPTH` levels (a plain value is one level). That is as deep as the
  protobuf parser reads inside a whole request, so both encodings accept and refuse
  the same spans.
- keys of key-value lists are strings.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from tracer.spans._numbers import needs_check, span_number_problem
from tracer.spans.model import Span

__all__ = [
    "MAX_VALUE_DEPTH",
    "Rejections",
    "attributes_problem",
    "json_id_problem",
    "span_problem",
]

#: The deepest attribute value stored, in levels (a plain value is 1, an array of plain
#: values 2). The protobuf parser reads a whole request up to 32 levels, no deeper.
MAX_VALUE_DEPTH = 32
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
_HEX = frozenset("0123456789abcdefABCDEF")
_EXAMPLE_CHARS = 40


class Rejections:
    r"""Spans (or other units, such as log records) rejected from one request: how many,
    and why (one example per reason)."""

    def __init__(self, unit: str = "span") -> None:
        self.count = 0
        self.unit = unit
        self._reasons: dict[str, list[Any]] = {}

    def add(self, reason: str, example: object = None, spans: int = 1) -> None:
        """Count ``spans`` rejected for ``reason``; the first ``example`` is kept."""
        if spans <= 0:
            return
        self.count += spans
        entry = self._reasons.get(reason)
        if entry is None:
            self._reasons[reason] = [spans, example]
        else:
            entry[0] += spans

    def copy(self) -> Rejections:
        """A tally that starts with this one's counts and reasons."""
        other = Rejections(self.unit)
        other.count = self.count
        other._reasons = {reason: list(entry) for reason, entry in self._reasons.items()}
        return other

    def message(self) -> str:
        """One sentence per reason, e.g. ``2 spans: parent span id ... (first: 'abc')``."""
        parts = []
        for reason, (n, example) in self._reasons.items():
            text = f"{n} {self.unit}{'s' if n != 1 else ''}: {reason}"
            if example is not None:
                shown = repr(example)
                if len(shown) > _EXAMPLE_CHARS:
                    shown = shown[: _EXAMPLE_CHARS - 3] + "..."
                text += f" (first: {shown})"
            parts.append(text)
        return "; ".join(parts)


def json_id_problem(value: Any, n_bytes: int, what: str, optional: bool = False) -> str | None:
    """Why an OTLP JSON id field cannot be used, or None when it can.

    ``value`` is the raw field (``traceId``, ``spanId``, ``parentSpanId``); ``n_bytes``
    its size (16 or 8). With ``optional``, a missing or empty value is fine (a root
    span's parent).
    """
    if value is None or value == "":
        return None if optional else f"no {what}"
    if type(value) is not str:
        return f"{what} is not a string"
    digits = 2 * n_bytes
    if len(value) == digits and _HEX.issuperset(value):
        raw = value
    else:
        try:
            raw = base64.b64decode(value, validate=True).hex()
        except (binascii.Error, ValueError):
            raw = ""
        if len(raw) != digits:
            return f"{what} is not {digits} hex digits or base64 of {n_bytes} bytes"
    if not raw.strip("0"):
        return f"{what} is all zeros" + (" (leave it empty for a root span)" if optional else "")
    return None


def span_problem(span: Span) -> tuple[str, object] | None:
    """Why a decoded span cannot be stored, with the offending value; None when it can."""
    if len(span.trace_id) != 32 or not span.trace_id.strip("0"):
        return "trace id is not 16 bytes or is all zeros", span.trace_id
    if len(span.span_id) != 16 or not span.span_id.strip("0"):
        return "span id is not 8 bytes or is all zeros", span.span_id
    parent = span.parent_id
    if parent is not None and (len(parent) != 16 or not parent.strip("0")):
        return "parent span id is not 8 bytes (leave it empty for a root span)", parent
    if not (INT64_MIN <= span.kind <= INT64_MAX and INT64_MIN <= span.status <= INT64_MAX):
        for name, label in _FIELD_NAMES.items():
            value = getattr(span, name)
            if not INT64_MIN <= value <= INT64_MAX:
                return f"{label} does not fit in 64 bits", value
    if needs_check(span):
        problem = span_number_problem(span)
        if problem is not None:
            return problem
    return attributes_problem(span.attributes)


_FIELD_NAMES = {"kind": "span kind", "status": "status code"}


def attributes_problem(attributes: dict[str, Any]) -> tuple[str, object] | None:
    """Why attributes cannot be stored (keys, 64-bit integers, nesting), or None."""
    # Most values are strings: one type check each, no recursion.
    stack: list[tuple[Any, int]] = []
    for key, value in attributes.items():
        if type(key) is not str:
            return "an attribute key is not a string", key
        kind = type(value)
        if kind is str or kind is float or kind is bool or value is None:
            continue
        stack.append((value, 1))
    while stack:
        value, depth = stack.pop()
        kind = type(value)
        if kind is int:
            if not INT64_MIN <= value <= INT64_MAX:
                return "an integer attribute value does not fit in 64 bits", value
        elif kind is list:
            if value and depth >= MAX_VALUE_DEPTH:
                return f"an attribute value nests deeper than {MAX_VALUE_DEPTH} levels", None
            stack.extend((item, depth + 1) for item in value)
        elif kind is dict:
            if value and depth >= MAX_VALUE_DEPTH:
                return f"an attribute value nests deeper than {MAX_VALUE_DEPTH} levels", None
            for key, item in value.items():
                if type(key) is not str:
                    return "a key-value list has a key that is not a string", key
                stack.append((item, depth + 1))
        elif not (kind is str or kind is float or kind is bool or value is None):
            return f"an attribute value of type {kind.__name__} cannot be stored", None
    return None
