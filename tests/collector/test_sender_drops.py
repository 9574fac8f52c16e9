"""/healthz adds up the spans the senders say they dropped before sending."""

from __future__ import annotations

import httpx
import orjson
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from collector import BackgroundCollector
from collector.decode import decode_body
from tests.collector.test_receiver import _otlp_json
from tracer.attributes import SPANS_DROPPED
from tracer.sdk.batch import SnapshotBatchProcessor, SpanDrops
from tracer.sdk.json_export import JsonSpanExporter


def _spans(service: str, dropped: int | None) -> list:
    extra = {} if dropped is None else {SPANS_DROPPED: dropped}
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service, **extra}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.get_tracer("test").start_span("work").end()
    return list(memory.get_finished_spans())


@pytest.mark.parametrize("is_json", [True, False])
def test_the_drop_counts_on_the_resources_of_a_body_are_added_up(is_json):
    spans = _spans("a", 2) + _spans("b", None) + _spans("c", 5)
    body = orjson.dumps(_otlp_json(spans)) if is_json else encode_spans(spans).SerializeToString()
    decoded = decode_body(
        [body], is_json=is_json, gzipped=False, max_body_bytes=1 << 20, content=None
    )
    assert decoded.sender_dropped == 7
    assert len(decoded.rows) == 3


class _FailsFirst:
    """The JSON exporter, except that its first export fails without sending."""

    def __init__(self, exporter: JsonSpanExporter) -> None:
        self.exporter = exporter
        self.failed = False

    def export_snapshots(self, items, resources):
        if not self.failed:
            self.failed = True
            return SpanExportResult.FAILURE
        return self.exporter.export_snapshots(items, resources)

    def shutdown(self) -> None:
        self.exporter.shutdown()


def test_healthz_counts_the_spans_a_processor_dropped_once_its_next_batch_arrives(tmp_path):
    with BackgroundCollector(tmp_path / "spans.db") as collector:
        exporter = _FailsFirst(JsonSpanExporter(collector.endpoint + "/v1/traces"))
        processor = SnapshotBatchProcessor(exporter, schedule_delay_millis=60_000)
        provider = TracerProvider(resource=Resource.create({"service.name": "svc"}))
        provider.add_span_processor(processor)
        tracer = provider.get_tracer("test")
        for size in (3, 2, 1):  # the first batch fails; the second carries its count
            for i in range(size):
                tracer.start_span(f"s{i}").end()
            assert processor.force_flush()
        health = httpx.get(collector.endpoint + "/healthz").json()
        provider.shutdown()
    assert processor.drops == SpanDrops(export_failed=3)
    assert health["spans_stored"] == 3
    assert health["spans_dropped_by_senders"] == 3
