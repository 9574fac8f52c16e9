"""A serving engine's or naming scheme's attributes, by what they hold."""

from __future__ import annotations

from dataclasses import dataclass

from tracer import attributes as attrs

__all__ = ["Convention", "event_key"]


@dataclass(frozen=True)
class Convention:
    """The attributes one serving engine or naming scheme writes, by what they hold."""

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
    #: the attributes the request span's phases are read from
    #: (:func:`~tracer.analysis.conventions.phases.engine_intervals`)
    phases: tuple[str, ...] = ()
    #: the attributes a prefill/decode coordinator's own time to first token is read from
    coordinator: tuple[str, ...] = ()
    #: token counts: input (prompt), output (completion), cached prompt tokens
    input_tokens: tuple[str, ...] = ()
    output_tokens: tuple[str, ...] = ()
    cached_tokens: tuple[str, ...] = ()
    #: the model's name
    model: tuple[str, ...] = ()


def event_key(name: str) -> str:
    """The attribute a decoder keeps the time of the phase event ``name`` in."""
    return attrs.EVENT_TIME_PREFIX + name
