"""Prompt and completion content, dropped from spans before they are stored.

GenAI instrumentations record the prompt and the answer as span attributes by default
(the keys :func:`tracer.attributes.is_content_key` names). The collector removes them
at ingest, for every format, unless it is run with ``keep_content``.
"""

from __future__ import annotations

from collections.abc import Iterable

from tracer.attributes import is_content_key
from tracer.spans.model import Span

__all__ = ["ContentFilter"]


class ContentFilter:
    """Drops prompt and completion attributes from spans, in place.

    Keys found not to be content are remembered (up to ``max_known`` of them), so a
    span whose keys were all seen before costs one set comparison in C, however many
    attributes it has. Used from one thread at a time.
    """

    def __init__(self, max_known: int = 10_000):
        self._clean: set[str] = set()
        self._max_known = max_known

    def drop(self, spans: Iterable[Span]) -> int:
        """Remove the content attributes of ``spans``; returns how many were removed."""
        clean = self._clean
        dropped = 0
        for s in spans:
            attributes = s.attributes
            if not attributes or attributes.keys() <= clean:
                continue
            content = []
            for key in attributes:
                if key in clean:
                    continue
                if type(key) is str and is_content_key(key):
                    content.append(key)
                elif len(clean) < self._max_known:
                    clean.add(key)
            for key in content:
                del attributes[key]
            dropped += len(content)
        return dropped
