"""Traces waiting to be complete before the live attribution takes them.

A trace is **ready** when the arrival rule of :func:`tracer.analysis.loaders.arrival.is_complete`
holds (every span's parent has arrived, and every service that traces of the same
entry point went through has reported) and no span of it has arrived for ``settle_s``
seconds (services export on their own batch timers, so a trace that looks complete
may still be missing a service never seen before). A trace still not ready
``timeout_s`` seconds after its first span is **timed out**: it is attributed as it
is when its root span has arrived, else dropped (both counted).

Memory is bounded: past ``max_spans`` spans held, the traces that began arriving
first are evicted (counted). The ids of recently attributed traces are remembered
(two generations of ``recent`` ids) so that a span arriving after its trace was
attributed is counted as late rather than starting a new trace.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from tracer.spans.model import Span

__all__ = ["DEFAULT_MAX_SPANS", "DEFAULT_SETTLE_S", "DEFAULT_TIMEOUT_S", "PendingTraces"]

DEFAULT_SETTLE_S = 1.0
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_SPANS = 200_000
#: Entry points (root service, root name, run) whose services are remembered.
_MAX_ENTRIES = 10_000


@dataclass
class _Trace:
    first_s: float
    last_s: float
    spans: list[Span] = field(default_factory=list)
    #: ``last_s`` when it was last found incomplete: unchanged since, it still is
    #: (the services a trace must have only ever grow).
    incomplete_at: float = -1.0


class PendingTraces:
    """Spans grouped by trace until each trace is ready, timed out or evicted.

    ``complete(spans, services)`` is the arrival rule (passed in, so that this module
    loads nothing of the analyzer); ``run_of(spans)`` names a trace's run.
    """

    def __init__(
        self,
        complete: Callable[[list[Span], set[str]], bool],
        run_of: Callable[[list[Span]], str],
        *,
        settle_s: float = DEFAULT_SETTLE_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_spans: int = DEFAULT_MAX_SPANS,
        recent: int = 100_000,
    ):
        if settle_s < 0 or not timeout_s > settle_s:
            raise ValueError("settle_s must be >= 0 and timeout_s greater than settle_s")
        if max_spans <= 0:
            raise ValueError(f"max_spans must be positive, got {max_spans!r}")
        self._complete = complete
        self._run_of = run_of
        self.settle_s, self.timeout_s, self.max_spans = settle_s, timeout_s, max_spans
        self._traces: OrderedDict[str, _Trace] = OrderedDict()  # by first arrival
        self.spans_held = 0
        self._services: OrderedDict[tuple[str, str, str], set[str]] = OrderedDict()
        self._recent_new: set[str] = set()
        self._recent_old: set[str] = set()
        self._recent = max(1, recent // 2)
        self.late_spans = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._traces)

    def add(self, spans: list[Span], now_s: float) -> None:
        """Hold ``spans`` (any traces, any order)."""
        traces = self._traces
        for span in spans:
            tid = span.trace_id
            trace = traces.get(tid)
            if trace is None:
                if tid in self._recent_new or tid in self._recent_old:
                    self.late_spans += 1
                    continue
                trace = traces[tid] = _Trace(now_s, now_s)
            trace.spans.append(span)
            trace.last_s = now_s
        self.spans_held += len(spans)
        while self.spans_held > self.max_spans and traces:
            _, oldest = traces.popitem(last=False)
            self.spans_held -= len(oldest.spans)
            self.evicted += 1

    def take(
        self, now_s: float
    ) -> tuple[list[tuple[str, list[Span]]], list[tuple[str, list[Span]]]]:
        """The traces ready now and the ones timed out, taken out of the pending set."""
        ready: list[tuple[str, list[Span]]] = []
        timed_out: list[tuple[str, list[Span]]] = []
        settle_before = now_s - self.settle_s
        expire_before = now_s - self.timeout_s
        for tid, trace in list(self._traces.items()):
            if (
                trace.last_s <= settle_before
                and trace.incomplete_at != trace.last_s
                and self._is_complete(trace)
            ):
                ready.append((tid, trace.spans))
            elif trace.first_s <= expire_before:
                timed_out.append((tid, trace.spans))
            else:
                continue
            del self._traces[tid]
            self.spans_held -= len(trace.spans)
            self._remember(tid)
        return ready, timed_out

    def _is_complete(self, trace: _Trace) -> bool:
        spans = trace.spans
        roots = [s for s in spans if s.parent_id is None]
        if len(roots) != 1:  # its root is still to come (or it is broken: the timeout takes it)
            trace.incomplete_at = trace.last_s
            return False
        root = roots[0]
        key = (root.service, root.name, self._run_of(spans))
        services = self._services.get(key)
        if services is None:
            services = self._services[key] = set()
            if len(self._services) > _MAX_ENTRIES:
                self._services.popitem(last=False)
        services.update(s.service for s in spans)
        if self._complete(spans, services):
            return True
        trace.incomplete_at = trace.last_s
        return False

    def _remember(self, trace_id: str) -> None:
        self._recent_new.add(trace_id)
        if len(self._recent_new) >= self._recent:
            self._recent_old, self._recent_new = self._recent_new, set()
