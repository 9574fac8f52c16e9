"""OpenInference's token counts and model name (Arize Phoenix's instrumentations)."""

from __future__ import annotations

from tracer import attributes as attrs
from tracer.engines.convention import Convention

CONVENTION = Convention(
    "openinference",
    input_tokens=(attrs.OPENINFERENCE_PROMPT_TOKENS,),
    output_tokens=(attrs.OPENINFERENCE_COMPLETION_TOKENS,),
    cached_tokens=(attrs.OPENINFERENCE_CACHE_READ_TOKENS,),
    model=(attrs.OPENINFERENCE_MODEL_NAME,),
)
