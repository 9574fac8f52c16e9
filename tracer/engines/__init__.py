"""What the analyzer knows of each serving engine and naming convention, one module
each, and the key sets every other part derives from them.

A :class:`Convention` lists the span attributes (and events) one engine or one naming
scheme writes, by what they hold: latencies in seconds or milliseconds, Rust
durations, phase events, token counts, the model's name. The loaders range-check every
numeric one at ingest (:mod:`tracer.spans._numbers`), the OTLP decoders keep the phase
events' times, the phases and the batches read the phase keys
(:mod:`tracer.analysis.conventions.phases`), and the token counts read the token keys, first
found first (:mod:`tracer.analysis.model.breakdown`): all from :data:`REGISTRY`, so a new
engine is one module here and its line in :data:`REGISTRY`.
"""

from __future__ import annotations

from collections.abc import Iterable

from tracer.engines import genai, llmd, openinference, tgi, triton, vllm
from tracer.engines.convention import Convention, event_key

__all__ = [
    "CACHED_TOKEN_KEYS",
    "COORDINATOR_KEYS",
    "DURATION_KEYS",
    "INPUT_TOKEN_KEYS",
    "MILLISECONDS_KEYS",
    "MODEL_KEYS",
    "OUTPUT_TOKEN_KEYS",
    "PHASE_EVENTS",
    "PHASE_KEYS",
    "REGISTRY",
    "SECONDS_KEYS",
    "TOKEN_COUNT_KEYS",
    "Convention",
    "event_key",
]


#: Every convention the analyzer reads, in the order their keys are tried: the naming
#: schemes first (a trace's token counts take the first key found), then the engines.
REGISTRY: tuple[Convention, ...] = (
    genai.CONVENTION,
    openinference.CONVENTION,
    vllm.CONVENTION,
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
#: The phase events' names (the decoders keep their times).
PHASE_EVENTS = frozenset(_all(c.events for c in REGISTRY))
#: The attributes the phases read (the batches read them per trace).
PHASE_KEYS = frozenset(_all(c.phases for c in REGISTRY))
COORDINATOR_KEYS = frozenset(_all(c.coordinator for c in REGISTRY))
INPUT_TOKEN_KEYS = _all(c.input_tokens for c in REGISTRY)
OUTPUT_TOKEN_KEYS = _all(c.output_tokens for c in REGISTRY)
CACHED_TOKEN_KEYS = _all(c.cached_tokens for c in REGISTRY)
MODEL_KEYS = _all(c.model for c in REGISTRY)
#: Every attribute of a token count.
TOKEN_COUNT_KEYS = INPUT_TOKEN_KEYS + OUTPUT_TOKEN_KEYS + CACHED_TOKEN_KEYS
