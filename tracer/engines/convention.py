"""A serving engine's or naming scheme's spans and attributes, by what they hold."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from tracer import attributes as attrs

__all__ = ["Convention", "Interval", "Request", "event_key"]

#: One phase of a request span: (sub-stage, start, end), nanoseconds on the span's
#: corrected clock (``inference.queue``, ``inference.prefill``, ...).
Interval: TypeAlias = tuple[str, int, int]


class Request(Protocol):
    """An engine request span as a :attr:`Convention.intervals` function reads it: its
    times corrected for clock skew, and its attributes converted."""

    #: the span's start and end
    start_ns: int
    end_ns: int
    #: its first-token mark (None: none)
    first_token_ns: int | None
    #: the start of its child span named :attr:`Convention.child` (None: no such child)
    child_start_ns: int | None

    def latency_ns(self, key: str) -> int | None:
        """The latency attribute ``key`` in nanoseconds, read in the unit the registry
        lists it under (:attr:`Convention.seconds`, ``milliseconds`` or ``durations``);
        None when the span has no usable value."""
        ...

    def event_ns(self, name: str) -> int | None:
        """The time of the span's phase event ``name`` (one of
        :attr:`Convention.events`); None when it has none."""
        ...


@dataclass(frozen=True)
class Convention:
    """What one serving engine or naming scheme writes: its spans (the rules that find
    them), its attributes by what they hold, and how its request span splits into
    phases. Every key the analysis reads of it is listed here, so that the registry
    (:mod:`tracer.engines`) derives the ingest checks, the phase and token keys from it."""

    name: str
    #: latencies in seconds (numbers)
    seconds: tuple[str, ...] = ()
    #: latencies in milliseconds (numbers)
    milliseconds: tuple[str, ...] = ()
    #: durations as Rust prints them (``"3.9ms"``)
    durations: tuple[str, ...] = ()
    #: span events whose time the decoders keep, as an attribute of the event's name
    #: after :data:`~tracer.attributes.EVENT_TIME_PREFIX`
    events: tuple[str, ...] = ()
    #: the attributes :attr:`intervals` reads (an event's: :func:`event_key` of it)
    phases: tuple[str, ...] = ()
    #: the request span's phases, from its attributes (called for a span that carries
    #: one of :attr:`phases` at least; an interval past the span is clipped to it)
    intervals: Callable[[Request], list[Interval]] | None = None
    #: the name of the request span's child whose start :attr:`intervals` reads
    child: str = ""
    #: the attributes a prefill/decode coordinator's own time to first token is read
    #: from (a latency from its span's start; the first one found)
    coordinator: tuple[str, ...] = ()
    #: token counts: input (prompt), output (completion), cached prompt tokens
    input_tokens: tuple[str, ...] = ()
    output_tokens: tuple[str, ...] = ()
    cached_tokens: tuple[str, ...] = ()
    #: the model's name
    model: tuple[str, ...] = ()
    #: the rules that give its spans their stage or role, in the ``--stage-map``
    #: format (``docs/conventions.md``): its request span (``role =
    #: "engine_request"``), the child spans that name its phases; each with a
    #: ``source`` that says where it was read
    rules: tuple[Mapping[str, Any], ...] = ()


def event_key(name: str) -> str:
    """The attribute a decoder keeps the time of the phase event ``name`` in."""
    return attrs.EVENT_TIME_PREFIX + name
