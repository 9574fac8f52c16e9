"""llm-d's prefill/decode proxy: its request span's phases (prefill, the KV cache's
transfer, decode, one after the other) and its own time to first token, milliseconds."""

from __future__ import annotations

from tracer import attributes as attrs
from tracer.engines.convention import Convention

_PHASES = (attrs.LLMD_PREFILL_MS, attrs.LLMD_KV_TRANSFER_MS, attrs.LLMD_DECODE_MS)
CONVENTION = Convention(
    "llm-d",
    milliseconds=_PHASES + (attrs.LLMD_TRUE_TTFT_MS,),
    phases=_PHASES,
    coordinator=(attrs.LLMD_TRUE_TTFT_MS,),
)
