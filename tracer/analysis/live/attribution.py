"""Live attribution: stored rows in, traces attributed as ``hoptrace analyze`` does,
metrics out.

Rows the collector committed are turned back into spans (as the store reads them),
held in :class:`~collector.pending.PendingTraces` until each trace is ready, then
attributed a batch at a time by the analyzer's own
:class:`~tracer.analysis.attribution.attribute.Attributor` (critical path per stage,
end-to-end, TTFT, tokens, model), so the live figures and ``hoptrace analyze`` of the
same store agree. Each trace is recorded into every sink (Prometheus, OTLP, the
last-minute window of ``hoptrace top``) with its weight (what a sampled trace stands
for, :mod:`tracer.analysis.sampling.weights`; 1 for full data) under its labels: the
root's service, its ``hoptrace.run``, its model and its ``http.route``
(:data:`collector.metrics.LABELS`, bounded by :class:`~collector.metrics.LabelLimiter`).

Runs in the attribution process (:mod:`tracer.analysis.live.worker`), which the
receiver starts by module path: it loads numpy and the analyzer, which the receiver
never does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from collector._rows import span_of_row
from collector.metrics import LabelLimiter, Labels
from collector.pending import PendingTraces
from tracer import attributes as attrs
from tracer.analysis.attribution.attribute import NONE, Attributor, split_value
from tracer.analysis.loaders.arrival import is_complete
from tracer.analysis.table._table import TraceTable
from tracer.spans.model import Span, Warnings

__all__ = ["LiveAttribution", "ROUTE_ATTRIBUTES", "Sink"]

#: Where a trace's route comes from: the earliest span carrying one of these.
ROUTE_ATTRIBUTES = ("http.route",)
_ERROR = 2  # OTLP STATUS_CODE_ERROR
_NS = 1e9


class Sink(Protocol):
    """Where attributed traces go."""

    def record(
        self,
        labels: Labels,
        e2e_s: float,
        ttft_s: float | None,
        stages: dict[str, float],
        tokens: tuple[int, int],
        error: bool,
        weight: float = 1.0,
    ) -> None: ...


def _route(spans: list[Span]) -> str:
    for key in ROUTE_ATTRIBUTES:
        value = split_value(spans, key)
        if value != NONE:
            return value
    return NONE


class LiveAttribution:
    """Attributes the traces of the rows it is given and records them into ``sinks``."""

    def __init__(
        self,
        sinks: Sequence[Sink],
        *,
        settle_s: float,
        timeout_s: float,
        max_spans: int,
        limiter: LabelLimiter | None = None,
    ):
        self.sinks = list(sinks)
        self.pending = PendingTraces(
            lambda spans, services: is_complete(spans, services),
            lambda spans: split_value(spans, attrs.RUN),
            settle_s=settle_s,
            timeout_s=timeout_s,
            max_spans=max_spans,
        )
        self.limiter = limiter or LabelLimiter()
        self._attributor = Attributor("stage", None)
        self.attributed = {"complete": 0, "timed_out": 0}
        self.dropped = {"evicted": 0, "no_root": 0, "unusable": 0}
        self.unreadable_rows = 0

    def add_rows(self, rows: list[tuple], now_s: float) -> None:
        """Rows as :func:`collector.store.span_row` makes them, just committed."""
        tally = Warnings()
        spans = [s for row in rows if (s := span_of_row(row, tally)) is not None]
        self.unreadable_rows += len(rows) - len(spans)
        self.pending.add(spans, now_s)

    def tick(self, now_s: float) -> int:
        """Attribute what is ready (or timed out) at ``now_s``; returns how many."""
        ready, timed_out = self.pending.take(now_s)
        with_root = [(t, s) for t, s in timed_out if any(x.parent_id is None for x in s)]
        self.dropped["no_root"] += len(timed_out) - len(with_root)
        self.dropped["evicted"] = self.pending.evicted
        done = self._attribute(ready, "complete") + self._attribute(with_root, "timed_out")
        return done

    def counts(self) -> dict[str, Any]:
        """The pipeline's counts, as :meth:`collector.metrics.PrometheusInstruments.set_counts`
        takes them."""
        return {
            "attributed": dict(self.attributed),
            "dropped": dict(self.dropped),
            "late_spans": self.pending.late_spans,
            "overflow": dict(self.limiter.overflow),
            "pending_traces": len(self.pending),
            "pending_spans": self.pending.spans_held,
        }

    def _attribute(self, traces: list[tuple[str, list[Span]]], how: str) -> int:
        if not traces:
            return 0
        meta: dict[str, tuple[str, str, bool]] = {}
        attributor = self._attributor
        attributor.table = TraceTable()  # the shapes learnt so far are kept
        for seq, (tid, spans) in enumerate(traces):
            meta[tid] = (
                split_value(spans, attrs.RUN),
                _route(spans),
                any(s.status == _ERROR for s in spans),
            )
            attributor(tid, spans, seq, 0)
        table = attributor.table
        cols = table.columns()
        n = len(cols.ids)
        self.dropped["unusable"] += len(traces) - n
        self.attributed[how] += n
        if not n:
            return 0
        strings = cols.strings
        names = cols.group_names
        stages: list[dict[str, float]] = [{} for _ in range(n)]
        rows, keys, values = cols.groups
        for r, k, v in zip(rows.tolist(), keys.tolist(), values.tolist(), strict=True):
            stages[r][names[k]] = v / _NS
        e2e = cols.e2e_ns.tolist()
        ttft = cols.ttft_ns.tolist()
        tin = cols.input_tokens.tolist()
        tout = cols.output_tokens.tolist()
        model = cols.model.tolist()
        service = cols.root_service.tolist()
        weight = [1.0] * n if cols.weight is None else cols.weight.tolist()
        for i, tid in enumerate(cols.ids.tolist()):
            run, route, error = meta[tid]
            name = strings[model[i]] if model[i] >= 0 else None
            labels = self.limiter(
                (str(strings[service[i]]), run, str(name) if name else NONE, route)
            )
            ttft_s = ttft[i] / _NS if ttft[i] >= 0 else None
            tokens = (max(tin[i], 0), max(tout[i], 0))
            for sink in self.sinks:
                sink.record(labels, e2e[i] / _NS, ttft_s, stages[i], tokens, error, weight[i])
        return n
