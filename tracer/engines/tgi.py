"""Text Generation Inference's request span: its validation and queue times, as Rust
durations (``"3.911207ms"``)."""

from __future__ import annotations

from tracer import attributes as attrs
from tracer.engines.convention import Convention

_PHASES = (attrs.TGI_VALIDATION_TIME, attrs.TGI_QUEUE_TIME)
CONVENTION = Convention("tgi", durations=_PHASES, phases=_PHASES)
