"""SGLang (``--enable-trace``): its request span ``Req <rid[:8]>`` (attribute ``rid``),
the slices below it that name the request's phases, and the P/D bootstrap room above
the prefill and decode requests. Its request span's latencies are vLLM's keys, read
by :mod:`tracer.engines.vllm`."""

from __future__ import annotations

from tracer import attributes as attrs
from tracer.engines.convention import Convention

_STATS = "sglang/srt/observability/req_time_stats.py"

CONVENTION = Convention(
    "sglang",
    rules=(
        {
            "operation": ["Req *", "* Req *"],
            "attribute": "rid",
            "role": "engine_request",
            "source": "SGLang python/sglang/srt/tracing/trace.py trace_req_start: the request "
            "span, attribute rid",
        },
        {
            "operation": ["prefill_waiting"],
            "inside": "engine_request",
            "stage": attrs.INFERENCE_QUEUE,
            "source": f"SGLang {_STATS}: waiting queue to first forward",
        },
        {
            "operation": ["prefill_forward", "chunked_prefill"],
            "inside": "engine_request",
            "stage": attrs.INFERENCE_PREFILL,
            "source": "SGLang req_time_stats.py: first forward to prefill finished",
        },
        {
            "operation": ["decode_waiting", "decode_forward", "decode_loop"],
            "inside": "engine_request",
            "stage": attrs.INFERENCE_DECODE,
            "source": "SGLang req_time_stats.py: prefill finished to completion",
        },
        {
            "operation": ["spec_draft"],
            "inside": "engine_request",
            "stage": "inference.decode.spec_draft",
            "source": "unconfirmed: no SGLang tracing source names this slice (speculative "
            "decoding's draft steps)",
        },
        {
            "operation": ["spec_verify"],
            "inside": "engine_request",
            "stage": "inference.decode.spec_verify",
            "source": "unconfirmed: no SGLang tracing source names this slice (speculative "
            "decoding's verification)",
        },
        {
            "operation": ["Bootstrap Room", "Bootstrap Room *"],
            "stage": "inference",
            "source": "SGLang tracing: the P/D bootstrap room above the prefill and decode "
            "requests",
        },
    ),
)
