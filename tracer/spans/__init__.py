"""The span model and OTLP decoding: the leaf that the collector and the analyzer share.

It imports nothing of hoptrace but :mod:`tracer.attributes` and :mod:`tracer._errors`,
and nothing here imports the analyzer or the collector back, so ``import collector``
stays free of numpy and the analysis code.
"""

from __future__ import annotations

from tracer.spans.model import (
    KIND_CLIENT,
    KIND_CONSUMER,
    KIND_INTERNAL,
    KIND_PRODUCER,
    KIND_SERVER,
    Span,
    Warnings,
    kind_from_name,
)
from tracer.spans.otlp import (
    first_token_ns,
    normalize_id,
    spans_from_otlp_json,
    spans_from_otlp_proto,
)

__all__ = [
    "KIND_CLIENT",
    "KIND_CONSUMER",
    "KIND_INTERNAL",
    "KIND_PRODUCER",
    "KIND_SERVER",
    "Span",
    "Warnings",
    "first_token_ns",
    "kind_from_name",
    "normalize_id",
    "spans_from_otlp_json",
    "spans_from_otlp_proto",
]
