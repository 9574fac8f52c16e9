"""GenAI semantic-convention helpers for inference spans.

    with tracer.stage("inference", **tracer.genai_request("chat", "llama-3-8b", max_tokens=64)):
        reply = await call_model(...)
        tracer.record_usage(input_tokens=812, output_tokens=64, finish_reasons=["stop"])

Prompt and completion content is never recorded here.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from tracer import attributes as attrs

__all__ = ["genai_request", "record_engine_latency", "record_usage"]


def genai_request(
    operation: str,
    model: str,
    *,
    provider: str | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
    stream: bool | None = None,
) -> dict[str, AttributeValue]:
    """Attributes of a GenAI request, for ``stage(..., **genai_request(...))``.

    Args:
        operation: ``gen_ai.operation.name`` (``chat``, ``text_completion``, ...).
        model: ``gen_ai.request.model``.
        provider: ``gen_ai.provider.name`` (e.g. ``openai``, ``vllm``).
        max_tokens: ``gen_ai.request.max_tokens``.
        temperature: ``gen_ai.request.temperature``.
        stream: ``gen_ai.request.stream``.

    Raises:
        ValueError: an empty operation or model.
    """
    if not operation or not model:
        raise ValueError(f"operation and model must be non-empty, got {operation!r}, {model!r}")
    out: dict[str, AttributeValue] = {
        attrs.GEN_AI_OPERATION_NAME: operation,
        attrs.GEN_AI_REQUEST_MODEL: model,
    }
    if provider is not None:
        out[attrs.GEN_AI_PROVIDER_NAME] = provider
    if max_tokens is not None:
        out[attrs.GEN_AI_MAX_TOKENS] = int(max_tokens)
    if temperature is not None:
        out[attrs.GEN_AI_REQUEST_TEMPERATURE] = float(temperature)
    if stream is not None:
        out[attrs.GEN_AI_REQUEST_STREAM] = bool(stream)
    return out


def record_usage(
    *,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    response_model: str | None = None,
    finish_reasons: Sequence[str] | None = None,
    span: Span | None = None,
) -> None:
    """Record GenAI usage on ``span`` (the current span when omitted)."""
    target = span or trace.get_current_span()
    if not target.is_recording():
        return
    usage: dict[str, AttributeValue] = {}
    if input_tokens is not None:
        usage[attrs.GEN_AI_INPUT_TOKENS] = int(input_tokens)
    if output_tokens is not None:
        usage[attrs.GEN_AI_OUTPUT_TOKENS] = int(output_tokens)
    if response_model is not None:
        usage[attrs.GEN_AI_RESPONSE_MODEL] = response_model
    if finish_reasons is not None:
        usage[attrs.GEN_AI_RESPONSE_FINISH_REASONS] = list(finish_reasons)
    if usage:  # one call: the SDK takes its lock and checks the span once, not per key
        target.set_attributes(usage)


def record_engine_latency(
    *,
    time_to_first_token_s: float | None = None,
    queue_s: float | None = None,
    prefill_s: float | None = None,
    decode_s: float | None = None,
    e2e_s: float | None = None,
    span: Span | None = None,
) -> None:
    """Record where a serving engine's request spent its time, in seconds, under the
    names vLLM writes on its ``llm_request`` span (``gen_ai.latency.*``); hoptrace then
    splits the span into ``inference.queue``, ``inference.prefill`` and
    ``inference.decode``. The time to first token counts from the span's start.
    """
    target = span or trace.get_current_span()
    if not target.is_recording():
        return
    latencies: dict[str, AttributeValue] = {}
    for key, value in (
        (attrs.GEN_AI_LATENCY_TTFT, time_to_first_token_s),
        (attrs.GEN_AI_LATENCY_QUEUE, queue_s),
        (attrs.GEN_AI_LATENCY_PREFILL, prefill_s),
        (attrs.GEN_AI_LATENCY_DECODE, decode_s),
        (attrs.GEN_AI_LATENCY_E2E, e2e_s),
    ):
        if value is not None:
            latencies[key] = float(value)
    if prefill_s is not None and decode_s is not None:
        latencies[attrs.GEN_AI_LATENCY_INFERENCE] = float(prefill_s + decode_s)
    if latencies:
        target.set_attributes(latencies)
