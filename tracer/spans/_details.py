"""What a GenAI operation-details event tells of its span (:mod:`tracer.spans.events`)."""

from __future__ import annotations

from typing import Any

from tracer import attributes as attrs

__all__ = ["DETAIL_KEYS", "merge_details"]

#: What an operation-details event may tell of its span.
DETAIL_KEYS = (
    attrs.GEN_AI_INPUT_TOKENS,
    attrs.GEN_AI_OUTPUT_TOKENS,
    attrs.GEN_AI_PROMPT_TOKENS,
    attrs.GEN_AI_COMPLETION_TOKENS,
    attrs.GEN_AI_CACHE_READ_TOKENS,
    attrs.GEN_AI_CACHE_WRITE_TOKENS,
    attrs.GEN_AI_CACHE_CREATION_TOKENS,
    attrs.GEN_AI_REASONING_TOKENS,
    attrs.GEN_AI_TIME_TO_FIRST_CHUNK,
    attrs.GEN_AI_RESPONSE_MODEL,
    attrs.GEN_AI_REQUEST_MODEL,
)


def merge_details(attributes: dict[str, Any], event_attributes: dict[str, Any]) -> None:
    """Copy into ``attributes`` the :data:`DETAIL_KEYS` of an operation-details event
    that it lacks."""
    for key in DETAIL_KEYS:
        if key in event_attributes and key not in attributes:
            attributes[key] = event_attributes[key]
