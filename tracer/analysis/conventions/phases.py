"""A serving engine's request span split into queue, prefill and decode.

vLLM's ``llm_request`` span (and SGLang's request span) report, in seconds, the time to
first token from the span's start (the request's arrival), and the time in the queue,
in prefill and in decode. With S the span and FT = S.start + time_to_first_token::

    inference.prefill = [FT - prefill, FT]
    inference.queue   = [FT - prefill - queue, FT - prefill]
    inference.decode  = [FT, FT + decode]

TGI's request span records ``validation_time`` and ``queue_time`` (Rust durations such
as ``"3.911207ms"``): the queue is [S.start + validation, + queue]. Triton's model span
has a ``QUEUE_START`` event, and its ``compute`` child starts at ``COMPUTE_START``: the
queue lies between them. llm-d's P/D proxy records its phases in milliseconds, one
after the other from its request span's start: prefill, the KV cache's transfer
(``inference.kv_transfer``), decode. Every
interval is clipped to S; a missing value means no interval. The analyzer adds the
intervals as children of S, so they take part in the critical-path walk and in what-if
retiming like spans; what is left of S is its own ``inference`` time.
"""

from __future__ import annotations

from tracer import attributes as attrs
from tracer import engines
from tracer.engines import triton
from tracer.spans._numbers import TIME_LIMIT_NS, rust_duration_ns, seconds_ns
from tracer.spans.model import Span

__all__ = [
    "COORDINATOR_KEYS",
    "PHASE_KEYS",
    "coordinator_ttft_ns",
    "engine_intervals",
    "rust_duration_ns",
]

#: The attributes whose values :func:`engine_intervals` reads (the batches read them
#: per trace, through it, rather than keying a shape on them): the engines' phase keys
#: (:mod:`tracer.engines`).
PHASE_KEYS = engines.PHASE_KEYS


def _ms_ns(span: Span, key: str) -> int | None:
    value = span.attributes.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return seconds_ns(value / 1000)
    return None


#: The attributes whose values :func:`coordinator_ttft_ns` reads (the batches read them
#: per trace, through it).
COORDINATOR_KEYS = engines.COORDINATOR_KEYS


def coordinator_ttft_ns(span: Span) -> int | None:
    """The time to first token a P/D coordinator (llm-d's proxy) measured, ns from its
    span's start; None when the span has none."""
    return _ms_ns(span, attrs.LLMD_TRUE_TTFT_MS)


def engine_intervals(
    span: Span, start_ns: int, end_ns: int, compute_start_ns: int | None = None
) -> list[tuple[str, int, int]]:
    """(sub-stage, start, end) intervals of an engine request span whose (skew-corrected)
    interval is [start_ns, end_ns]; empty when the span reports none.

    ``compute_start_ns`` is the (corrected) start of Triton's ``compute`` child span,
    which carries ``COMPUTE_START`` when the model span does not.
    """
    shift = start_ns - span.start_ns  # the clock correction applied to the span
    raw: list[tuple[str, int | None, int | None]] = []
    get = span.attributes.get
    ttft = seconds_ns(get(attrs.GEN_AI_LATENCY_TTFT))
    first = (
        start_ns + ttft
        if ttft is not None
        else (span.first_token_ns + shift if span.first_token_ns is not None else None)
    )
    prefill = seconds_ns(get(attrs.GEN_AI_LATENCY_PREFILL))
    queue = seconds_ns(get(attrs.GEN_AI_LATENCY_QUEUE))
    decode = seconds_ns(get(attrs.GEN_AI_LATENCY_DECODE))
    if first is not None:
        if prefill is not None:
            raw.append((attrs.INFERENCE_PREFILL, first - prefill, first))
            if queue is not None:
                raw.append((attrs.INFERENCE_QUEUE, first - prefill - queue, first - prefill))
        if decode is not None:
            raw.append((attrs.INFERENCE_DECODE, first, first + decode))
    validation = rust_duration_ns(get(attrs.TGI_VALIDATION_TIME))
    waited = rust_duration_ns(get(attrs.TGI_QUEUE_TIME))
    if waited is not None:
        begin = start_ns + (validation or 0)
        raw.append((attrs.INFERENCE_QUEUE, begin, begin + waited))
    queued = get(triton.QUEUE_START)
    computing = get(triton.COMPUTE_START)
    if type(computing) is int and 0 <= computing < TIME_LIMIT_NS:
        compute_start_ns = computing + shift
    if type(queued) is int and 0 <= queued < TIME_LIMIT_NS and compute_start_ns is not None:
        raw.append((attrs.INFERENCE_QUEUE, queued + shift, compute_start_ns))
    prefill_pd = _ms_ns(span, attrs.LLMD_PREFILL_MS)
    if prefill_pd is not None:
        at = start_ns
        for sub, length in (
            (attrs.INFERENCE_PREFILL, prefill_pd),
            (attrs.INFERENCE_KV_TRANSFER, _ms_ns(span, attrs.LLMD_KV_TRANSFER_MS)),
            (attrs.INFERENCE_DECODE, _ms_ns(span, attrs.LLMD_DECODE_MS)),
        ):
            if length is not None:
                raw.append((sub, at, at + length))
                at += length
    out = []
    for stage, lo, hi in raw:
        if lo is None or hi is None:
            continue
        lo, hi = max(lo, start_ns), min(hi, end_ns)
        if hi > lo:
            out.append((stage, lo, hi))
    return out
