"""What the analyzer knows of each serving engine and naming convention, one module
each, and what every other part derives from them.

A :class:`Convention` lists what one engine or one naming scheme writes: the rules that
find its spans (its request span, the child spans that name its phases), its
attributes by what they hold (latencies in seconds or milliseconds, Rust durations,
phase events, token counts, the model's name), and how its request span splits into
queue, prefill and decode (``intervals``). From :data:`REGISTRY` the stage rules take
the engines' rules (:func:`~tracer.analysis.conventions.stage_map.conventions`, before
``conventions.toml``), the loaders range-check every numeric key at ingest
(:mod:`tracer.spans._numbers`), the OTLP decoders keep the phase events' times, the
phases read each engine's ``intervals`` and the batches the phase keys
(:mod:`tracer.analysis.conventions.phases`), and the token counts read the token keys,
first found first (:mod:`tracer.analysis.model.breakdown`).

**A new engine** is one module here, a ``CONVENTION`` like the others', and its line
in :data:`REGISTRY`.
"""

from __future__ import annotations

from collections.abc import Iterable

from tracer.engines import genai, llmd, openinference, sglang, tgi, triton, vllm
from tracer.engines.convention import Convention, Interval, Request, event_key

__all__ = [
    "CACHED_TOKEN_KEYS",
    "CHILD_SPANS",
    "COORDINATOR_KEYS",
    "COORDINATOR_ORDER",
    "DURATION_KEYS",
    "INTERVALS",
    "INPUT_TOKEN_KEYS",
    "MILLISECONDS_KEYS",
    "MODEL_KEYS",
    "OUTPUT_TOKEN_KEYS",
    "PHASE_EVENTS",
    "PHASE_KEYS",
    "REGISTRY",
    "SECONDS_KEYS",
    "TOKEN_COUNT_KEYS",
    "UNITS",
    "Convention",
    "Interval",
    "Request",
    "event_key",
]


#: Every convention the analyzer reads, in the order their keys and rules are tried:
#: the naming schemes first (a trace's token counts take the first key found), then
#: the engines.
REGISTRY: tuple[Convention, ...] = (
    genai.CONVENTION,
    openinference.CONVENTION,
    vllm.CONVENTION,
    sglang.CONVENTION,
    tgi.CONVENTION,
    triton.CONVENTION,
    llmd.CONVENTION,
)


def _all(keys: Iterable[tuple[str, ...]]) -> tuple[str, ...]:
    """The keys in registry order, each once."""
    return tuple(dict.fromkeys(k for group in keys for k in group))


SECONDS_KEYS = _all(c.seconds for c in REGISTRY)
MILLISECONDS_KEYS = _all(c.milliseconds for c in REGISTRY)
DURATION_KEYS = _all(c.durations for c in REGISTRY)
#: The unit each latency key is read in (``Request.latency_ns``).
UNITS: dict[str, str] = {
    **dict.fromkeys(SECONDS_KEYS, "seconds"),
    **dict.fromkeys(MILLISECONDS_KEYS, "milliseconds"),
    **dict.fromkeys(DURATION_KEYS, "duration"),
}
#: The phase events' names (the decoders keep their times).
PHASE_EVENTS = frozenset(_all(c.events for c in REGISTRY))
#: The attributes the phases read (the batches read them per trace).
PHASE_KEYS = frozenset(_all(c.phases for c in REGISTRY))
#: The engines with phases of their own: each one's ``intervals`` and the keys it reads,
#: in registry order.
INTERVALS = tuple((c.intervals, c.phases) for c in REGISTRY if c.intervals is not None)
#: The names of the request spans' children the phases read the start of.
CHILD_SPANS = frozenset(c.child for c in REGISTRY if c.child)
#: The attributes of a P/D coordinator's own time to first token (the first found is read).
COORDINATOR_ORDER = _all(c.coordinator for c in REGISTRY)
COORDINATOR_KEYS = frozenset(COORDINATOR_ORDER)
INPUT_TOKEN_KEYS = _all(c.input_tokens for c in REGISTRY)
OUTPUT_TOKEN_KEYS = _all(c.output_tokens for c in REGISTRY)
CACHED_TOKEN_KEYS = _all(c.cached_tokens for c in REGISTRY)
MODEL_KEYS = _all(c.model for c in REGISTRY)
#: Every attribute of a token count.
TOKEN_COUNT_KEYS = INPUT_TOKEN_KEYS + OUTPUT_TOKEN_KEYS + CACHED_TOKEN_KEYS
