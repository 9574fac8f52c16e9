"""Triton Inference Server: activity events on the model span (``QUEUE_START``) and on
its ``compute`` child (``COMPUTE_START``, ``COMPUTE_END``); the queue lies between the
queue's start and the compute's (the model span's own ``COMPUTE_START``, else its
``compute`` child's start)."""

from __future__ import annotations

from tracer import attributes as attrs
from tracer.engines.convention import Convention, Interval, Request, event_key

#: Triton's span for the model's execution, child of the model span.
COMPUTE_SPAN = attrs.TRITON_COMPUTE_SPAN
#: The attributes the loaders keep the queue's and the compute's starts in.
QUEUE_START = event_key(attrs.TRITON_QUEUE_START)
COMPUTE_START = event_key(attrs.TRITON_COMPUTE_START)


def intervals(r: Request) -> list[Interval]:
    """The queue, from its start to the compute's."""
    queued = r.event_ns(attrs.TRITON_QUEUE_START)
    computing = r.event_ns(attrs.TRITON_COMPUTE_START)
    if computing is None:
        computing = r.child_start_ns
    if queued is None or computing is None:
        return []
    return [(attrs.INFERENCE_QUEUE, queued, computing)]


CONVENTION = Convention(
    "triton",
    events=(attrs.TRITON_QUEUE_START, attrs.TRITON_COMPUTE_START, attrs.TRITON_COMPUTE_END),
    phases=(QUEUE_START, COMPUTE_START),
    intervals=intervals,
    child=COMPUTE_SPAN,
    rules=(
        {
            "attribute": "triton.model_name",
            "role": "engine_request",
            "source": "Triton src/tracer.cc: the model span (REQUEST_START, QUEUE_START, "
            "REQUEST_END events)",
        },
    ),
)
