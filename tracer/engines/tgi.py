"""Text Generation Inference's request span (the router's handler span): its
validation and queue times, as Rust durations (``"3.911207ms"``). The queue is
[S.start + validation, + queue]."""

from __future__ import annotations

from tracer import attributes as attrs
from tracer.engines.convention import Convention, Interval, Request

_PHASES = (attrs.TGI_VALIDATION_TIME, attrs.TGI_QUEUE_TIME)


def intervals(r: Request) -> list[Interval]:
    """The queue, after validation."""
    validation = r.latency_ns(attrs.TGI_VALIDATION_TIME)
    waited = r.latency_ns(attrs.TGI_QUEUE_TIME)
    if waited is None:
        return []
    begin = r.start_ns + (validation or 0)
    return [(attrs.INFERENCE_QUEUE, begin, begin + waited)]


CONVENTION = Convention(
    "tgi",
    durations=_PHASES,
    phases=_PHASES,
    intervals=intervals,
    rules=(
        {
            "operation": [
                "generate",
                "generate_stream",
                "chat_completions",
                "completions",
                "compat_generate",
            ],
            "attribute": attrs.TGI_INFERENCE_TIME,
            "role": "engine_request",
            "source": "TGI router/src/server.rs: the handler span records validation_time, "
            "queue_time, inference_time",
        },
        {
            "operation": "queued",
            "inside": "engine_request",
            "stage": attrs.INFERENCE_QUEUE,
            "source": "TGI backends/v3/src/queue.rs: span queued, closed when the entry joins "
            "a batch",
        },
    ),
)
