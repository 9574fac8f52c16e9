"""vLLM's (and SGLang's) engine request span: its latencies in seconds; the time to
first token, queue, prefill and decode place its phases."""

from __future__ import annotations

from tracer import attributes as attrs
from tracer.engines.convention import Convention

_PHASES = (
    attrs.GEN_AI_LATENCY_TTFT,
    attrs.GEN_AI_LATENCY_QUEUE,
    attrs.GEN_AI_LATENCY_PREFILL,
    attrs.GEN_AI_LATENCY_DECODE,
)
CONVENTION = Convention(
    "vllm",
    seconds=_PHASES + (attrs.GEN_AI_LATENCY_INFERENCE, attrs.GEN_AI_LATENCY_E2E),
    phases=_PHASES,
)
