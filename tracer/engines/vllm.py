"""vLLM's engine request span (``llm_request``): its latencies in seconds; the time to
first token, queue, prefill and decode place its phases. SGLang's request span writes
the same latencies (:mod:`tracer.engines.sglang` finds it; these phases read it).

With S the span and FT = S.start + time_to_first_token (else S's first-token mark)::

    inference.prefill = [FT - prefill, FT]
    inference.queue   = [FT - prefill - queue, FT - prefill]
    inference.decode  = [FT, FT + decode]
"""

from __future__ import annotations

from tracer import attributes as attrs
from tracer.engines.convention import Convention, Interval, Request

_PHASES = (
    attrs.GEN_AI_LATENCY_TTFT,
    attrs.GEN_AI_LATENCY_QUEUE,
    attrs.GEN_AI_LATENCY_PREFILL,
    attrs.GEN_AI_LATENCY_DECODE,
)


def intervals(r: Request) -> list[Interval]:
    """Queue, prefill and decode, placed around the first token."""
    ttft = r.latency_ns(attrs.GEN_AI_LATENCY_TTFT)
    first = r.start_ns + ttft if ttft is not None else r.first_token_ns
    prefill = r.latency_ns(attrs.GEN_AI_LATENCY_PREFILL)
    queue = r.latency_ns(attrs.GEN_AI_LATENCY_QUEUE)
    decode = r.latency_ns(attrs.GEN_AI_LATENCY_DECODE)
    out: list[Interval] = []
    if first is None:
        return out
    if prefill is not None:
        out.append((attrs.INFERENCE_PREFILL, first - prefill, first))
        if queue is not None:
            out.append((attrs.INFERENCE_QUEUE, first - prefill - queue, first - prefill))
    if decode is not None:
        out.append((attrs.INFERENCE_DECODE, first, first + decode))
    return out


CONVENTION = Convention(
    "vllm",
    seconds=_PHASES + (attrs.GEN_AI_LATENCY_INFERENCE, attrs.GEN_AI_LATENCY_E2E),
    phases=_PHASES,
    intervals=intervals,
    rules=(
        {
            "operation": "llm_request",
            "role": "engine_request",
            "source": "vLLM vllm/v1/engine/output_processor.py do_tracing (span llm_request, "
            "SERVER)",
        },
        {
            "attribute": attrs.GEN_AI_LATENCY_QUEUE,
            "role": "engine_request",
            "source": "vLLM vllm/tracing/utils.py SpanAttributes",
        },
        {
            "attribute": attrs.GEN_AI_LATENCY_PREFILL,
            "role": "engine_request",
            "source": "vLLM SpanAttributes; SGLang sglang/srt/managers/tokenizer_manager.py "
            "(root span)",
        },
        {
            "attribute": attrs.GEN_AI_LATENCY_DECODE,
            "role": "engine_request",
            "source": "vLLM SpanAttributes; SGLang root span",
        },
        {
            "attribute": attrs.GEN_AI_LATENCY_SCHEDULER,
            "role": "engine_request",
            "source": "vLLM vllm/tracing/utils.py SpanAttributes (time_in_scheduler, "
            "time_in_model_forward, time_in_model_execute)",
        },
        {
            "attribute": attrs.GEN_AI_LATENCY_FORWARD,
            "role": "engine_request",
            "source": "vLLM SpanAttributes",
        },
        {
            "attribute": attrs.GEN_AI_LATENCY_EXECUTE,
            "role": "engine_request",
            "source": "vLLM SpanAttributes",
        },
        {
            "operation": ["vllm.request.queue", "vllm_queue"],
            "inside": "engine_request",
            "stage": attrs.INFERENCE_QUEUE,
            "source": "vLLM child spans (vllm.request.*; vllm_* as proposed in "
            "vllm-project/vllm PR 44402)",
        },
        {
            "operation": ["vllm.request.prefill", "vllm_prefill"],
            "inside": "engine_request",
            "stage": attrs.INFERENCE_PREFILL,
            "source": "vLLM child spans",
        },
        {
            "operation": ["vllm.request.decode", "vllm_decode"],
            "inside": "engine_request",
            "stage": attrs.INFERENCE_DECODE,
            "source": "vLLM child spans",
        },
    ),
)
