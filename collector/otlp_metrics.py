"""The live metrics through OTLP: the same instruments as :mod:`collector.metrics`,
recorded with the OpenTelemetry metrics SDK and pushed by its OTLP/HTTP exporter to an
OpenTelemetry metrics pipeline (a Collector, or any OTLP receiver). Opt-in: the
collector's ``--otlp-metrics URL`` or ``$HOPTRACE_OTLP_METRICS_ENDPOINT``.

Instrument names follow OpenTelemetry's dotted style; a Collector's Prometheus
exporter turns ``hoptrace.trace.duration`` (unit ``s``) back into
``hoptrace_trace_duration_seconds``. Runs in the attribution process.
"""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource

from collector.metrics import BUCKETS_S, LABELS, Labels

__all__ = ["OTLP_NAMES", "OtlpInstruments"]

#: The OTLP instrument of each Prometheus metric.
OTLP_NAMES = {
    "hoptrace_trace_duration_seconds": "hoptrace.trace.duration",
    "hoptrace_trace_ttft_seconds": "hoptrace.trace.ttft",
    "hoptrace_stage_seconds_total": "hoptrace.stage.time",
    "hoptrace_tokens_total": "hoptrace.tokens",
    "hoptrace_trace_errors_total": "hoptrace.trace.errors",
}


class OtlpInstruments:
    """Records attributed traces and exports them every ``interval_s`` to
    ``endpoint`` (a base URL: ``/v1/metrics`` is added)."""

    def __init__(self, endpoint: str, interval_s: float = 10.0):
        url = endpoint.rstrip("/")
        if not url.endswith("/v1/metrics"):
            url += "/v1/metrics"
        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=url), export_interval_millis=interval_s * 1000
        )
        self._provider = MeterProvider(
            metric_readers=[reader],
            resource=Resource.create({"service.name": "hoptrace-collector"}),
        )
        meter = self._provider.get_meter("hoptrace.collector")
        self.duration = meter.create_histogram(
            OTLP_NAMES["hoptrace_trace_duration_seconds"],
            unit="s",
            description="End-to-end time of attributed traces.",
            explicit_bucket_boundaries_advisory=BUCKETS_S,
        )
        self.ttft = meter.create_histogram(
            OTLP_NAMES["hoptrace_trace_ttft_seconds"],
            unit="s",
            description="Client-perceived time to first token of attributed traces.",
            explicit_bucket_boundaries_advisory=BUCKETS_S,
        )
        self.stage = meter.create_counter(
            OTLP_NAMES["hoptrace_stage_seconds_total"],
            unit="s",
            description="Critical-path time per stage, summed over attributed traces.",
        )
        self.tokens = meter.create_counter(
            OTLP_NAMES["hoptrace_tokens_total"],
            unit="{token}",
            description="Tokens of attributed traces.",
        )
        self.errors = meter.create_counter(
            OTLP_NAMES["hoptrace_trace_errors_total"],
            unit="{trace}",
            description="Attributed traces with a span of error status.",
        )

    def record(
        self,
        labels: Labels,
        e2e_s: float,
        ttft_s: float | None,
        stages: dict[str, float],
        tokens: tuple[int, int],
        error: bool,
        weight: float = 1.0,
    ) -> None:
        """One attributed trace, counted ``weight`` times (what a sampled trace stands
        for). The OpenTelemetry metrics API records a histogram value once per call, so
        a sampled trace's values are recorded ``round(weight)`` times (at least once);
        the counters add ``weight`` times the amount."""
        base = dict(zip(LABELS, labels, strict=True))
        times = max(1, round(weight))
        for _ in range(times):
            self.duration.record(e2e_s, base)
            if ttft_s is not None:
                self.ttft.record(ttft_s, base)
        for stage, seconds in stages.items():
            self.stage.add(seconds * weight, {**base, "stage": stage})
        if tokens[0]:
            self.tokens.add(tokens[0] * weight, {**base, "direction": "input"})
        if tokens[1]:
            self.tokens.add(tokens[1] * weight, {**base, "direction": "output"})
        self.errors.add(weight if error else 0, base)

    def close(self) -> None:
        """Export what is recorded and stop."""
        self._provider.shutdown()
