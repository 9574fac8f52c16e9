"""A set of traces as loaded from one or more sources."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from tracer.analysis.model import LoadWarnings, Span
from tracer.attributes import RUN

__all__ = ["TraceSet"]


@dataclass
class TraceSet:
    """Spans grouped by trace id, with what the loaders skipped."""

    traces: dict[str, list[Span]] = field(default_factory=dict)
    warnings: LoadWarnings = field(default_factory=LoadWarnings)

    @property
    def span_count(self) -> int:
        """Number of spans held (duplicates included until analysis drops them)."""
        return sum(len(v) for v in self.traces.values())

    def add(self, spans: Iterable[Span]) -> None:
        """Add spans, grouping them by trace id."""
        traces = self.traces
        for s in spans:
            bucket = traces.get(s.trace_id)
            if bucket is None:
                traces[s.trace_id] = [s]
            else:
                bucket.append(s)

    def keep(
        self, service: str | None = None, operation: str | None = None, run: str | None = None
    ) -> TraceSet:
        """The traces that contain a span of ``service`` (and ``operation``), and, with
        ``run``, a span whose ``hoptrace.run`` attribute matches that glob pattern."""
        if service is None and operation is None and run is None:
            return self
        kept = {
            tid: spans
            for tid, spans in self.traces.items()
            if (
                (service is None and operation is None)
                or any(
                    (service is None or s.service == service)
                    and (operation is None or s.name == operation)
                    for s in spans
                )
            )
            and (run is None or any(_run_matches(s, run) for s in spans))
        }
        return TraceSet(kept, self.warnings)


def _run_matches(span: Span, pattern: str) -> bool:
    value = span.attributes.get(RUN)
    return isinstance(value, str) and fnmatchcase(value, pattern)
