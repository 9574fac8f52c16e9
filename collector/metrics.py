"""The live metrics' instruments in Prometheus form (``prometheus_client``), their
labels and their buckets; docs/metrics.md lists them for users.

Every attributed trace is one observation of :data:`TRACE_DURATION` (its end-to-end
time) and, when it has a first-token point, of :data:`TRACE_TTFT`; its critical-path
time per stage goes into the :data:`STAGE_TIME` counter, so that a stage's share of the
time is ``sum(stage seconds) / sum(end-to-end seconds)`` over any window, as
``hoptrace analyze`` computes it. Labels are bounded by :class:`LabelLimiter`: past a
label's limit of distinct values, new values become ``other`` (counted).

Runs in the attribution process (:mod:`tracer.analysis.live.worker`), never in the receiver.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = [
    "BUCKETS_S",
    "LABELS",
    "LABEL_LIMITS",
    "LabelLimiter",
    "Labels",
    "MAX_LABEL_SETS",
    "OTHER",
    "PrometheusInstruments",
    "STAGE_TIME",
    "TOKENS",
    "TRACE_DURATION",
    "TRACE_ERRORS",
    "TRACE_TTFT",
    "observe",
]

#: Histogram bucket bounds (seconds) for end-to-end times and TTFT: requests to models
#: take from a few milliseconds (a cached answer, an error) to minutes (long
#: generations), so the bounds run 5 ms to 120 s, about 1.5x apart between 50 ms and
#: 20 s where most chat requests fall; +Inf is added by the library.
BUCKETS_S = (
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
    1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0,
)  # fmt: skip
#: The labels of every trace metric, in order.
LABELS = ("service", "run", "model", "route")
#: Distinct values kept per label; past it a new value is :data:`OTHER`.
LABEL_LIMITS = {"service": 20, "run": 50, "model": 20, "route": 50}
#: Distinct label sets kept in all; past it a new set is ``other`` in every label.
MAX_LABEL_SETS = 2000
OTHER = "other"
TRACE_DURATION = "hoptrace_trace_duration_seconds"
TRACE_TTFT = "hoptrace_trace_ttft_seconds"
STAGE_TIME = "hoptrace_stage_seconds_total"
TOKENS = "hoptrace_tokens_total"
TRACE_ERRORS = "hoptrace_trace_errors_total"

Labels = tuple[str, str, str, str]


class LabelLimiter:
    """Bounds label values: at most ``limits[label]`` distinct values per label and
    ``max_sets`` distinct label sets; what comes past them is :data:`OTHER`."""

    def __init__(self, limits: Mapping[str, int] = LABEL_LIMITS, max_sets: int = MAX_LABEL_SETS):
        self._limits = [limits[name] for name in LABELS]
        self._seen: list[set[str]] = [set() for _ in LABELS]
        self._sets: set[Labels] = set()
        self._max_sets = max_sets
        #: values turned into ``other``, by label (``sets``: whole label sets)
        self.overflow = dict.fromkeys((*LABELS, "sets"), 0)

    def __call__(self, values: Labels) -> Labels:
        """The label set to record ``values`` under."""
        if values in self._sets:
            return values
        out = []
        for i, value in enumerate(values):
            seen = self._seen[i]
            if value not in seen:
                if len(seen) >= self._limits[i]:
                    self.overflow[LABELS[i]] += 1
                    value = OTHER
                else:
                    seen.add(value)
            out.append(value)
        kept: Labels = (out[0], out[1], out[2], out[3])
        if kept not in self._sets:
            if len(self._sets) >= self._max_sets:
                self.overflow["sets"] += 1
                return (OTHER, OTHER, OTHER, OTHER)
            self._sets.add(kept)
        return kept


#: Counts that go up and down (the store's size, its oldest span): gauges.
_GAUGES = frozenset(
    {"hoptrace_collector_store_bytes", "hoptrace_collector_store_oldest_span_timestamp_ns"}
)


class _Counts(Collector):
    """Counters (and the gauges in :data:`_GAUGES`) whose values another part keeps
    (the receiver's and the live pipeline's counts), reported as they were last set."""

    def __init__(self) -> None:
        self.values: dict[str, tuple[str, dict[tuple[str, str] | None, float]]] = {}

    def set(self, name: str, doc: str, value: float, label: tuple[str, str] | None = None) -> None:
        self.values.setdefault(name, (doc, {}))[1][label] = value

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        for name, (doc, by_label) in sorted(self.values.items()):
            names = sorted({lab[0] for lab in by_label if lab is not None})
            kind = GaugeMetricFamily if name in _GAUGES else CounterMetricFamily
            family = kind(name, doc, labels=names)
            for label, value in by_label.items():
                family.add_metric([] if label is None else [label[1]], value)
            yield family


class PrometheusInstruments:
    """The trace metrics in a registry of their own, and the pipeline's counts."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.duration = Histogram(
            TRACE_DURATION,
            "End-to-end time of attributed traces (root span), seconds.",
            LABELS,
            buckets=BUCKETS_S,
            registry=r,
        )
        self.ttft = Histogram(
            TRACE_TTFT,
            "Client-perceived time to first token of attributed traces, seconds.",
            LABELS,
            buckets=BUCKETS_S,
            registry=r,
        )
        self.stage = Counter(
            STAGE_TIME.removesuffix("_total"),
            "Critical-path time per stage, summed over attributed traces, seconds; "
            "divided by the duration histogram's sum it is the stage's share.",
            (*LABELS, "stage"),
            registry=r,
        )
        self.tokens = Counter(
            TOKENS.removesuffix("_total"),
            "Tokens of attributed traces (input: prompt, output: completion).",
            (*LABELS, "direction"),
            registry=r,
        )
        self.errors = Counter(
            TRACE_ERRORS.removesuffix("_total"),
            "Attributed traces with a span of error status.",
            LABELS,
            registry=r,
        )
        self.pending_traces = Gauge(
            "hoptrace_live_pending_traces", "Traces waiting to be complete.", registry=r
        )
        self.pending_spans = Gauge(
            "hoptrace_live_pending_spans",
            "Spans held by traces waiting to be complete.",
            registry=r,
        )
        self.counts = _Counts()
        r.register(self.counts)
        self._children: dict[Labels, tuple[Any, Any, Any, dict[Any, Any]]] = {}

    def _of(self, labels: Labels) -> tuple[Any, Any, Any, dict[Any, Any]]:
        """The label set's children (looked up once: ``labels()`` costs a few us)."""
        found = self._children.get(labels)
        if found is None:
            found = self._children[labels] = (
                self.duration.labels(*labels),
                self.ttft.labels(*labels),
                self.errors.labels(*labels),
                {},
            )
            found[2].inc(0)
        return found

    def record(
        self,
        labels: Labels,
        e2e_s: float,
        ttft_s: float | None,
        stages: Mapping[str, float],
        tokens: tuple[int, int],
        error: bool,
        weight: float = 1.0,
    ) -> None:
        """One attributed trace, counted ``weight`` times (what a sampled trace stands
        for): every counter and histogram is then an estimate of all the traffic."""
        duration, ttft, errors, by_key = self._of(labels)
        observe(duration, e2e_s, weight)
        if ttft_s is not None:
            observe(ttft, ttft_s, weight)
        for stage, seconds in stages.items():
            child = by_key.get(stage)
            if child is None:
                child = by_key[stage] = self.stage.labels(*labels, stage)
            child.inc(seconds * weight)
        for direction, n in zip(_DIRECTIONS, tokens, strict=True):
            if n:
                child = by_key.get(direction)
                if child is None:
                    child = by_key[direction] = self.tokens.labels(*labels, direction[1])
                child.inc(n * weight)
        if error:  # the series exists from the first trace on, so its rate reads 0, not none
            errors.inc(weight)

    def set_counts(self, counts: Mapping[str, Any]) -> None:
        """The live pipeline's and the receiver's counts (:func:`count_docs` names)."""
        for key, value in counts.items():
            if isinstance(value, dict):
                name, doc, label = _COUNT_DOCS[key]
                for sub, n in value.items():
                    self.counts.set(name, doc, float(n), (label, str(sub)))
            elif key in _COUNT_DOCS and value is not None:
                name, doc, _ = _COUNT_DOCS[key]
                self.counts.set(name, doc, float(value))

    def render(self) -> bytes:
        """The Prometheus text exposition of everything."""
        return generate_latest(self.registry)


def observe(histogram: Any, value: float, weight: float) -> None:
    """``histogram.observe(value)`` counted ``weight`` times: the sum grows by
    ``value * weight`` and the value's bucket by ``weight`` (Prometheus histograms hold
    float counts). ``prometheus_client`` has no weighted observe, so this adds to the
    child's own sum and bucket counters, as its ``observe`` does; should a release
    keep them otherwise, the value is observed ``round(weight)`` times (at least once)."""
    if weight == 1.0:
        histogram.observe(value)
        return
    try:
        bounds, buckets, total = histogram._upper_bounds, histogram._buckets, histogram._sum
    except AttributeError:
        for _ in range(max(1, round(weight))):
            histogram.observe(value)
        return
    total.inc(value * weight)
    for bound, bucket in zip(bounds, buckets, strict=True):
        if value <= bound:
            bucket.inc(weight)
            break


#: Keys of the token counters among a label set's children (a tuple: no stage is one).
_DIRECTIONS = (("tokens", "input"), ("tokens", "output"))

#: Count key -> (metric name without ``_total``, help, label of a dict's keys).
_COUNT_DOCS: dict[str, tuple[str, str, str]] = {
    "attributed": (
        "hoptrace_live_traces_attributed",
        "Traces attributed, by how: complete, or timed_out (attributed as they were).",
        "how",
    ),
    "dropped": (
        "hoptrace_live_traces_dropped",
        "Traces not attributed, by reason: evicted (past the pending cap), no_root "
        "(timed out without a root span), unusable (no attributable root).",
        "reason",
    ),
    "late_spans": (
        "hoptrace_live_late_spans",
        "Spans that arrived after their trace was attributed (not counted in it).",
        "",
    ),
    "overflow": (
        "hoptrace_live_label_overflow",
        "Label values recorded as 'other' because a label reached its limit, by label.",
        "label",
    ),
    "feed_dropped_spans": (
        "hoptrace_live_feed_dropped_spans",
        "Stored spans the live attribution could not take (its queue was full).",
        "",
    ),
    "spans_stored": ("hoptrace_collector_spans_stored", "Spans stored by the collector.", ""),
    "store_bytes": (
        "hoptrace_collector_store_bytes",
        "Bytes of the span store on disk (its file and write-ahead log).",
        "",
    ),
    "store_oldest_span_ns": (
        "hoptrace_collector_store_oldest_span_timestamp_ns",
        "Start of the oldest span in the store, in ns since the epoch.",
        "",
    ),
    "retention_spans_removed": (
        "hoptrace_collector_retention_spans_removed",
        "Spans removed from the store by retention (--retention, --max-store-size).",
        "",
    ),
    "retention_partitions_removed": (
        "hoptrace_collector_retention_partitions_removed",
        "Time partitions of the store dropped whole by retention.",
        "",
    ),
    "spans_rejected": (
        "hoptrace_collector_spans_rejected",
        "Spans rejected by the collector (OTLP partial success).",
        "",
    ),
    "requests_refused": (
        "hoptrace_collector_requests_refused",
        "Export requests refused with 503 (memory limit, store failure, shutdown).",
        "",
    ),
    "requests_rejected": (
        "hoptrace_collector_requests_rejected",
        "Export requests rejected with a 4xx.",
        "",
    ),
}
