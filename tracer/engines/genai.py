"""The OpenTelemetry GenAI conventions' token counts and model, with the older
OpenLLMetry (and vLLM, SGLang) names ``prompt_tokens`` and ``completion_tokens``, and
the usage field's own name for cached tokens (llm-d's gateway, many SDKs)."""

from __future__ import annotations

from tracer import attributes as attrs
from tracer.engines.convention import Convention

CONVENTION = Convention(
    "genai",
    input_tokens=(attrs.GEN_AI_INPUT_TOKENS, attrs.GEN_AI_PROMPT_TOKENS),
    output_tokens=(attrs.GEN_AI_OUTPUT_TOKENS, attrs.GEN_AI_COMPLETION_TOKENS),
    cached_tokens=(attrs.GEN_AI_CACHE_READ_TOKENS, attrs.GEN_AI_CACHED_TOKENS),
    model=(attrs.GEN_AI_REQUEST_MODEL, attrs.GEN_AI_RESPONSE_MODEL),
)
