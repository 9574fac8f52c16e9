"""A set of traces as loaded from one or more sources."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from tracer.attributes import RUN
from tracer.spans._numbers import NUMERIC_KEYS, TIME_LIMIT_NS, checked
from tracer.spans.events import EventRecord, with_events
from tracer.spans.logs import LogEvent
from tracer.spans.model import Span, Warnings

__all__ = ["TraceFilter", "TraceSet"]


@dataclass
class TraceSet:
    """Spans grouped by trace id, with what the loaders skipped, and what each trace
    backend URL read turned out to be (URL without credentials -> ``"jaeger"`` or
    ``"tempo"``). ``events`` holds the span events that came as OTLP log records, by
    (trace id, span id), until :meth:`attach_events` gives them to their spans."""

    traces: dict[str, list[Span]] = field(default_factory=dict)
    warnings: Warnings = field(default_factory=Warnings)
    backends: dict[str, str] = field(default_factory=dict)
    events: dict[tuple[str, str], list[EventRecord]] = field(default_factory=dict)

    def add_events(self, events: Iterable[LogEvent]) -> None:
        """Keep span events that came as log records, for :meth:`attach_events`."""
        for e in events:
            self.events.setdefault((e.trace_id, e.span_id), []).append(
                (e.name, e.time_ns, e.attributes)
            )

    def attach_events(self) -> None:
        """Read the kept log-record events as span events of their spans
        (:func:`tracer.spans.events.with_events`); those whose span is not loaded are
        counted in the warnings."""
        if not self.events:
            return
        pending = self.events
        self.events = {}
        for trace_id, spans in self.traces.items():
            for n, s in enumerate(spans):
                own = pending.pop((trace_id, s.span_id), None)
                if own is not None:
                    spans[n] = with_events(s, own)
        if pending:
            self.warnings.skip(
                f"{sum(map(len, pending.values()))} log records belong to spans that were "
                "not loaded: give their trace files too",
                0,
            )

    @property
    def span_count(self) -> int:
        """Number of spans held (duplicates included until analysis drops them)."""
        return sum(len(v) for v in self.traces.values())

    def add(self, spans: Iterable[Span]) -> None:
        """Add spans, grouping them by trace id; a span with a time out of range is
        skipped, a number the analysis cannot use dropped (:mod:`tracer.spans._numbers`),
        and both counted in the warnings."""
        traces = self.traces
        limit, plain = TIME_LIMIT_NS, NUMERIC_KEYS.isdisjoint
        for s in spans:
            first, attributes = s.first_token_ns, s.attributes
            if not (
                0 <= s.start_ns < limit
                and 0 <= s.end_ns < limit
                and (first is None or 0 <= first < limit)
                and (not attributes or plain(attributes))
            ):
                checked_span = checked(s, self.warnings)
                if checked_span is None:
                    continue
                s = checked_span
            bucket = traces.get(s.trace_id)
            if bucket is None:
                traces[s.trace_id] = [s]
            else:
                bucket.append(s)

    def subset(self, trace_ids: Iterable[str]) -> TraceSet:
        """The traces whose ids are in ``trace_ids`` (those present), same warnings."""
        wanted = set(trace_ids)
        kept = {t: s for t, s in self.traces.items() if t in wanted}
        return TraceSet(kept, self.warnings, self.backends)

    def keep(self, selection: TraceFilter) -> TraceSet:
        """The traces ``selection`` keeps (all of them when it sets nothing)."""
        if not selection.active:
            return self
        kept = {tid: spans for tid, spans in self.traces.items() if selection.matches(spans)}
        return TraceSet(kept, self.warnings, self.backends)


@dataclass(frozen=True)
class TraceFilter:
    """Which whole traces to keep: a span of ``service`` (and ``operation``), a span
    whose ``hoptrace.run`` matches the glob ``run``, a start at or after ``since_ns``."""

    service: str | None = None
    operation: str | None = None
    run: str | None = None
    since_ns: int | None = None

    @property
    def active(self) -> bool:
        """True when it would drop anything."""
        return any(v is not None for v in (self.service, self.operation, self.run, self.since_ns))

    def matches(self, spans: list[Span]) -> bool:
        """True when the trace made of ``spans`` is kept."""
        service, operation, run = self.service, self.operation, self.run
        if (service is not None or operation is not None) and not any(
            (service is None or s.service == service) and (operation is None or s.name == operation)
            for s in spans
        ):
            return False
        if run is not None and not any(_run_matches(s, run) for s in spans):
            return False
        return self.since_ns is None or min(s.start_ns for s in spans) >= self.since_ns


def _run_matches(span: Span, pattern: str) -> bool:
    value = span.attributes.get(RUN)
    return isinstance(value, str) and fnmatchcase(value, pattern)
