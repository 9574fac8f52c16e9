"""llm-d's prefill/decode proxy: its request span's phases in milliseconds, one after
the other from the span's start: prefill, the KV cache's transfer
(``inference.kv_transfer``), decode; and its own time to first token."""

from __future__ import annotations

from tracer import attributes as attrs
from tracer.engines.convention import Convention, Interval, Request

_PHASES = (attrs.LLMD_PREFILL_MS, attrs.LLMD_KV_TRANSFER_MS, attrs.LLMD_DECODE_MS)


def intervals(r: Request) -> list[Interval]:
    """Prefill, the transfer and decode, end to end from the span's start."""
    prefill = r.latency_ns(attrs.LLMD_PREFILL_MS)
    if prefill is None:
        return []
    out: list[Interval] = []
    at = r.start_ns
    for sub, length in (
        (attrs.INFERENCE_PREFILL, prefill),
        (attrs.INFERENCE_KV_TRANSFER, r.latency_ns(attrs.LLMD_KV_TRANSFER_MS)),
        (attrs.INFERENCE_DECODE, r.latency_ns(attrs.LLMD_DECODE_MS)),
    ):
        if length is not None:
            out.append((sub, at, at + length))
            at += length
    return out


CONVENTION = Convention(
    "llm-d",
    milliseconds=_PHASES + (attrs.LLMD_TRUE_TTFT_MS,),
    phases=_PHASES,
    intervals=intervals,
    coordinator=(attrs.LLMD_TRUE_TTFT_MS,),
    rules=(
        {
            "operation": ["llm_d.pd_proxy.POST *", "llm_d.pd_proxy.request"],
            "role": "engine_request",
            "source": "llm-d-router pkg/sidecar/proxy/proxy_helpers.go (otelhttp server span "
            "llm_d.pd_proxy.<METHOD> <path>); llm-d docs/proposals/distributed-tracing.md",
        },
        {
            "operation": ["prefill", "llm_d.pd_proxy.prefill"],
            "inside": "engine_request",
            "stage": attrs.INFERENCE_PREFILL,
            "source": "llm-d-router pkg/sidecar/proxy/connector_nixlv2.go: prefill (INTERNAL); "
            "llm_d.pd_proxy.prefill on the parallel-dispatch path",
        },
        # Before the attribute rule below: the proxy writes its durations on the decode
        # span itself, which is a phase, not an engine request.
        {
            "operation": ["decode", "llm_d.pd_proxy.decode"],
            "inside": "engine_request",
            "stage": attrs.INFERENCE_DECODE,
            "after_parent": True,
            "source": "llm-d-router connector_nixlv2.go: decode (INTERNAL) started in "
            "prefill's context after prefill ended; llm_d.pd_proxy.decode, prefill's "
            "concurrent sibling, on the parallel-dispatch path",
        },
        {
            "attribute": attrs.LLMD_PREFILL_MS,
            "role": "engine_request",
            "source": "llm-d docs/proposals/distributed-tracing.md: the durations on the "
            "request span (the sidecar writes them on decode, matched above)",
        },
    ),
)
