"""The analyzer's span and trace model, shared by every loader and by the store."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

__all__ = [
    "KIND_CLIENT",
    "KIND_CONSUMER",
    "KIND_INTERNAL",
    "KIND_PRODUCER",
    "KIND_SERVER",
    "Span",
    "Warnings",
    "kind_from_name",
]

KIND_UNSPECIFIED, KIND_INTERNAL, KIND_SERVER, KIND_CLIENT, KIND_PRODUCER, KIND_CONSUMER = range(6)
_KIND_NAMES = {
    "internal": KIND_INTERNAL,
    "server": KIND_SERVER,
    "client": KIND_CLIENT,
    "producer": KIND_PRODUCER,
    "consumer": KIND_CONSUMER,
    "span_kind_internal": KIND_INTERNAL,
    "span_kind_server": KIND_SERVER,
    "span_kind_client": KIND_CLIENT,
    "span_kind_producer": KIND_PRODUCER,
    "span_kind_consumer": KIND_CONSUMER,
}


def kind_from_name(value: Any) -> int:
    """OTLP span kind (0..5) from an int, ``"client"`` or ``"SPAN_KIND_CLIENT"``; a JSON
    number written as ``3.0`` is 3, a boolean or anything else unspecified (0)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if type(value) is int and 0 <= value <= 5:
        return value
    if isinstance(value, str):
        if value.isdecimal():
            return kind_from_name(int(value))
        return _KIND_NAMES.get(value.lower(), KIND_UNSPECIFIED)
    return KIND_UNSPECIFIED


class Span(msgspec.Struct, gc=False, array_like=True):
    """One span as the analyzer sees it. Times are Unix nanoseconds.

    ``stage`` is the span's own ``hoptrace.stage`` attribute (None when absent);
    ``first_token_ns`` is the first-token mark, from the ``hoptrace.first_token``
    event or ``gen_ai.response.time_to_first_chunk``; ``trace_state`` the W3C trace
    state the span was recorded with (OTLP ``traceState``, Jaeger's ``w3c.tracestate``
    tag; None when empty), which carries a sampler's threshold (``ot=th:...``).

    A ``msgspec.Struct`` (built and freed in C, not tracked by the cycle collector: a
    span never refers back to itself), because a big file is millions of them; it
    compares, copies and pickles as the dataclass it replaced did. As msgspec encodes
    it, it is the array of its fields in this order (``array_like``): the span store
    keeps spans so, and decodes a trace's spans with one call.
    """

    trace_id: str
    span_id: str
    parent_id: str | None
    service: str
    name: str
    kind: int
    start_ns: int
    end_ns: int
    stage: str | None = None
    status: int = 0
    first_token_ns: int | None = None
    attributes: dict[str, Any] = {}
    trace_state: str | None = None

    @property
    def duration_ns(self) -> int:
        """End minus start."""
        return self.end_ns - self.start_ns


@dataclass
class Warnings:
    """What loading and preparing traces adjusted or could not use, and why.

    One tally for every step: loaders count skipped spans and traces and the values
    they dropped from spans (a number out of range, :mod:`tracer.spans._numbers`), the analyzer
    adds the orphans it re-parented and the spans it shifted for clock skew; tallies
    of separate steps, files or processes are added with :meth:`merge`.
    """

    orphans: int = 0
    skew_adjusted: int = 0
    skipped_traces: int = 0
    skipped_spans: int = 0
    duplicates: int = 0
    dropped_values: int = 0
    messages: list[str] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set, repr=False)

    @property
    def any(self) -> bool:
        """True when anything was adjusted, skipped or said."""
        return bool(
            self.orphans
            or self.skew_adjusted
            or self.skipped_traces
            or self.skipped_spans
            or self.duplicates
            or self.dropped_values
            or self.messages
        )

    def skip(self, reason: str, spans: int = 1) -> None:
        """Count skipped spans and keep the first message of each reason."""
        self.skipped_spans += spans
        self.note(reason)

    def merge(self, other: Warnings) -> None:
        """Add another tally's counts and new messages."""
        self.orphans += other.orphans
        self.skew_adjusted += other.skew_adjusted
        self.skipped_spans += other.skipped_spans
        self.skipped_traces += other.skipped_traces
        self.duplicates += other.duplicates
        self.dropped_values += other.dropped_values
        for m in other.messages:
            self.note(m)

    def note(self, message: str) -> None:
        """Keep a message once."""
        if message not in self._seen and len(self._seen) < 200:
            self._seen.add(message)
            self.messages.append(message)
