"""Triton Inference Server: activity events on the model span (``QUEUE_START``) and on
its ``compute`` child (``COMPUTE_START``, ``COMPUTE_END``); the queue lies between the
first two."""

from __future__ import annotations

from tracer import attributes as attrs
from tracer.engines.convention import Convention, event_key

#: Triton's span for the model's execution, child of the model span.
COMPUTE_SPAN = attrs.TRITON_COMPUTE_SPAN
#: The attributes the loaders keep the queue's and the compute's starts in.
QUEUE_START = event_key(attrs.TRITON_QUEUE_START)
COMPUTE_START = event_key(attrs.TRITON_COMPUTE_START)

CONVENTION = Convention(
    "triton",
    events=(attrs.TRITON_QUEUE_START, attrs.TRITON_COMPUTE_START, attrs.TRITON_COMPUTE_END),
    phases=(QUEUE_START, COMPUTE_START),
)
