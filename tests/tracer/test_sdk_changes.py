"""The snapshot processor loses no span silently: when the SDK keeps its spans another
way it reads them through their properties and says so once, and every span it drops
is counted, said once and reported with the next batch."""

from __future__ import annotations

import logging
import threading
import time

import orjson
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk import trace as sdk_trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracer
from tests.helpers import emit_sample_spans, fresh_tracer_provider
from tests.tracer.test_batch import _provider, _Recorder
from tracer.attributes import SPANS_DROPPED
from tracer.sdk.batch import SnapshotBatchProcessor, SpanDrops
from tracer.sdk.json_export import JsonSpanExporter
from tracer.spans import Warnings, spans_from_otlp_proto

_FAST_WAY = "fast way of reading spans"


class _RenamedReadableSpan(ReadableSpan):
    """A ReadableSpan of an SDK release that renamed its ``_name`` field."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._span_name = self.__dict__.pop("_name")

    @property
    def name(self) -> str:
        return self._span_name


class _MicrosReadableSpan(ReadableSpan):
    """A ReadableSpan of an SDK release that keeps its end time in microseconds."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._end_time = self._end_time // 1000 if self._end_time else self._end_time
        self._end_ns_rest = kwargs["end_time"] % 1000 if kwargs.get("end_time") else 0

    @property
    def end_time(self) -> int | None:
        return self._end_time * 1000 + self._end_ns_rest if self._end_time else self._end_time


def _warnings(caplog, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def _exported_both_ways(processor: SnapshotBatchProcessor, recorder: _Recorder):
    """The sample spans as the processor exported them, and as the SDK's protobuf
    encoder sends the same spans."""
    memory = InMemorySpanExporter()
    provider = _provider(processor)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    emit_sample_spans(provider.get_tracer("test", "1.2"))
    assert processor.force_flush()
    ours = sorted(recorder.spans(), key=lambda s: s.name)
    sdk = sorted(
        spans_from_otlp_proto(encode_spans(memory.get_finished_spans()), Warnings()),
        key=lambda s: s.name,
    )
    provider.shutdown()
    return ours, sdk


@pytest.mark.parametrize(
    ("span_class", "problem"),
    [
        (_RenamedReadableSpan, "a field it reads is missing (AttributeError"),
        (_MicrosReadableSpan, "its fields hold other values than its properties"),
    ],
)
def test_spans_are_exported_through_properties_when_the_sdk_keeps_them_otherwise(
    monkeypatch, caplog, span_class, problem
):
    monkeypatch.setattr(sdk_trace, "ReadableSpan", span_class)  # what Span hands on_end
    recorder = _Recorder()
    with caplog.at_level(logging.WARNING, logger="tracer.sdk.batch"):
        processor = SnapshotBatchProcessor(recorder, schedule_delay_millis=60_000)
        ours, sdk = _exported_both_ways(processor, recorder)
    assert not processor.reads_fields
    assert [s.name for s in ours] == ["child", "parent"]
    assert ours == sdk
    said = _warnings(caplog, _FAST_WAY)
    assert len(said) == 1 and problem in said[0], said
    assert processor.drops == SpanDrops()


def test_spans_are_read_from_fields_without_a_word_when_the_sdk_keeps_them_as_tested(caplog):
    recorder = _Recorder()
    with caplog.at_level(logging.WARNING, logger="tracer.sdk.batch"):
        processor = SnapshotBatchProcessor(recorder, schedule_delay_millis=60_000)
        ours, sdk = _exported_both_ways(processor, recorder)
    assert processor.reads_fields
    assert ours == sdk and len(ours) == 2
    assert [r for r in caplog.records if r.name.startswith("tracer")] == []


def test_the_sdk_disabled_leaves_the_properties_in_use_without_a_word(monkeypatch, caplog):
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    with caplog.at_level(logging.WARNING, logger="tracer.sdk.batch"):
        processor = SnapshotBatchProcessor(_Recorder(), schedule_delay_millis=60_000)
    assert not processor.reads_fields
    assert [r for r in caplog.records if r.name.startswith("tracer")] == []
    processor.shutdown()


def test_a_span_that_cannot_be_read_is_dropped_counted_and_said_once(caplog):
    recorder = _Recorder()
    processor = SnapshotBatchProcessor(recorder, schedule_delay_millis=60_000)
    with caplog.at_level(logging.WARNING, logger="tracer.sdk.batch"):
        for _ in range(3):
            processor.on_end(object())  # type: ignore[arg-type]  # no context, no name
    assert processor.drops == SpanDrops(snapshot_failed=3)
    assert len(_warnings(caplog, "could not be read")) == 1
    processor.shutdown()


class _FailingFirst(_Recorder):
    """Fails the first ``failures`` exports (FAILURE, or raises), then keeps bodies."""

    def __init__(self, failures: int, raises: bool = False) -> None:
        super().__init__()
        self.failures = failures
        self.raises = raises

    def export_snapshots(self, items, resources):
        if self.failures:
            self.failures -= 1
            if self.raises:
                raise ConnectionError("the receiver is away")
            return SpanExportResult.FAILURE
        super().export_snapshots(items, resources)
        return SpanExportResult.SUCCESS


def _reported(body: bytes) -> list[int | None]:
    """The drop count on each resource of an encoded batch (None where there is none)."""
    out: list[int | None] = []
    for rs in orjson.loads(body)["resourceSpans"]:
        values = [a["value"] for a in rs["resource"]["attributes"] if a["key"] == SPANS_DROPPED]
        out.append(int(values[0]["intValue"]) if values else None)
    return out


@pytest.mark.parametrize("raises", [False, True])
def test_a_failed_export_is_counted_said_once_and_reported_with_the_next_batch(caplog, raises):
    exporter = _FailingFirst(failures=2, raises=raises)
    processor = SnapshotBatchProcessor(exporter, schedule_delay_millis=60_000)
    t = _provider(processor).get_tracer("test")
    with caplog.at_level(logging.WARNING, logger="tracer.sdk.batch"):
        for size in (3, 4, 1, 1):  # spans per batch: two batches fail, two go
            for i in range(size):
                t.start_span(f"s{i}").end()
            assert processor.force_flush()
    assert processor.drops == SpanDrops(export_failed=7)
    assert len(_warnings(caplog, "failed; they are dropped")) == 1
    # The first batch that goes carries the seven; the next one carries nothing.
    assert [_reported(b) for b in exporter.bodies] == [[7], [None]]
    assert exporter.batches == [1, 1]


def test_the_count_a_failed_batch_carried_goes_with_the_next_one_and_its_own_spans():
    exporter = _FailingFirst(failures=1)
    processor = SnapshotBatchProcessor(exporter, schedule_delay_millis=60_000)
    for _ in range(3):
        processor.on_end(object())  # type: ignore[arg-type]  # three unreadable spans
    t = _provider(processor).get_tracer("test")
    t.start_span("lost").end()
    assert processor.force_flush()  # fails: the span is lost, the three are not reported
    t.start_span("sent").end()
    assert processor.force_flush()
    assert processor.drops == SpanDrops(export_failed=1, snapshot_failed=3)
    assert [_reported(b) for b in exporter.bodies] == [[4]]
    assert [s.name for s in exporter.spans()] == ["sent"]


class _Stuck(_Recorder):
    """An exporter whose first export hangs until released (a receiver that never answers)."""

    def __init__(self) -> None:
        super().__init__()
        self.busy, self.release = threading.Event(), threading.Event()

    def export_snapshots(self, items, resources):
        self.busy.set()
        self.release.wait(30)
        super().export_snapshots(items, resources)


@pytest.mark.parametrize(
    ("env", "keyword"),
    [("200", None), ("600000", 200)],  # the variable alone; the keyword wins over it
)
def test_shutdown_waits_at_most_the_export_timeout_then_counts_what_is_left(
    monkeypatch, caplog, env, keyword
):
    monkeypatch.setenv("OTEL_BSP_EXPORT_TIMEOUT", env)
    exporter = _Stuck()
    processor = SnapshotBatchProcessor(
        exporter,
        schedule_delay_millis=60_000,
        max_export_batch_size=2,
        export_timeout_millis=keyword,
    )
    t = _provider(processor).get_tracer("test")
    try:
        for i in range(2):
            t.start_span(f"sent{i}").end()  # a full batch: the worker sends it
        assert exporter.busy.wait(10)
        for i in range(3):
            t.start_span(f"left{i}").end()
        with caplog.at_level(logging.WARNING, logger="tracer.sdk.batch"):
            started = time.monotonic()
            processor.shutdown()
            waited = time.monotonic() - started
    finally:
        exporter.release.set()
    assert waited < 60  # 200 ms and the exporter's shutdown; not the variable's 600 s
    assert processor.drops == SpanDrops(export_failed=3)
    said = _warnings(caplog, "not sent within 200 ms of shutdown")
    assert len(said) == 1 and "3 queued spans are dropped" in said[0]
    assert exporter.shut


@pytest.mark.parametrize("timeout", [0, -5])
def test_a_timeout_that_is_not_positive_is_refused(timeout):
    with pytest.raises(ValueError, match="export_timeout_millis must be positive"):
        SnapshotBatchProcessor(_Recorder(), export_timeout_millis=timeout)


@pytest.mark.parametrize(
    ("exporter", "counted"),
    [
        (lambda: JsonSpanExporter("http://127.0.0.1:9/v1/traces"), True),
        (InMemorySpanExporter, False),
    ],
)
def test_dropped_spans_reports_the_counts_of_the_installed_pipeline_when_it_keeps_them(
    exporter, counted
):
    fresh_tracer_provider()
    try:
        tracer.setup("svc", exporter=exporter())
        assert tracer.dropped_spans() == (SpanDrops() if counted else None)
        tracer.shutdown()
        assert tracer.dropped_spans() is None
    finally:
        fresh_tracer_provider()
