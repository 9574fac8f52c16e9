"""The snapshot batch processor: the same spans reach the receiver as with the SDK's
processor, and what waits in its queue costs the garbage collector nothing."""

from __future__ import annotations

import gc
import logging
import threading

import orjson
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.helpers import emit_sample_spans, eventually
from tracer.sdk import snapshot as fields
from tracer.sdk.batch import RoutingSpanProcessor, SnapshotBatchProcessor, snapshot
from tracer.sdk.json_export import encode_snapshots
from tracer.sdk.probe import probe_span
from tracer.sdk.snapshot import public_snapshot
from tracer.spans import Warnings, spans_from_otlp_json, spans_from_otlp_proto


class _Recorder:
    """A snapshot exporter that keeps the encoded bodies."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.batches: list[int] = []
        self.shut = False
        self.lock = threading.Lock()

    def export_snapshots(self, items, resources):
        with self.lock:
            self.bodies.append(encode_snapshots(items, resources))
            self.batches.append(len(items))

    def shutdown(self) -> None:
        self.shut = True

    def spans(self):
        return [s for b in self.bodies for s in spans_from_otlp_json(orjson.loads(b), Warnings())]


def _provider(processor) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": "svc"}))
    provider.add_span_processor(processor)
    return provider


def _work(provider: TracerProvider) -> None:
    emit_sample_spans(provider.get_tracer("test", "1.2"))


def test_snapshots_reach_the_receiver_as_the_protobuf_exporter_sends_the_spans():
    recorder = _Recorder()
    processor = SnapshotBatchProcessor(recorder, schedule_delay_millis=60_000)
    memory = InMemorySpanExporter()  # the same spans, as the SDK hands them over
    provider = _provider(processor)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    _work(provider)
    assert processor.force_flush()
    via_snapshots = sorted(recorder.spans(), key=lambda s: s.name)
    via_protobuf = sorted(
        spans_from_otlp_proto(encode_spans(memory.get_finished_spans()), Warnings()),
        key=lambda s: s.name,
    )
    assert [s.name for s in via_snapshots] == ["child", "parent"]
    assert via_snapshots == via_protobuf
    provider.shutdown()
    assert recorder.shut


def test_a_queued_span_is_untracked_by_the_garbage_collector():
    memory = InMemorySpanExporter()
    provider = _provider(SimpleSpanProcessor(memory))
    _work(provider)
    items = {span.name: snapshot(span, 0) for span in memory.get_finished_spans()}
    # Untracked objects are never walked by a collection, nor moved to an older
    # generation, however long they wait in the queue. A span of plain values is
    # untracked at the first pass; one with array values (tuples, which the collector
    # untracks in the same pass, maybe after the snapshot) at the second.
    gc.collect()
    assert not gc.is_tracked(items["child"])
    gc.collect()
    assert not any(gc.is_tracked(item) for item in items.values())


class _OwnReadableSpan(ReadableSpan):
    """Not the SDK's own class: the snapshot reads it through its properties."""


def test_a_snapshot_read_from_fields_equals_one_read_through_properties():
    memory = InMemorySpanExporter()
    provider = _provider(SimpleSpanProcessor(memory))
    _work(provider)
    spans = memory.get_finished_spans()
    for span in spans:
        public = _OwnReadableSpan(
            name=span.name,
            context=span.context,
            parent=span.parent,
            resource=span.resource,
            attributes=span.attributes,
            events=span.events,
            links=span.links,
            kind=span.kind,
            status=span.status,
            start_time=span.start_time,
            end_time=span.end_time,
            instrumentation_scope=span.instrumentation_scope,
        )
        assert snapshot(span, 7) == snapshot(public, 7)
    assert [s.name for s in spans] == ["child", "parent"]  # an event, a link, an error


def test_a_snapshot_holds_the_span_with_its_fields_where_their_names_say():
    span = probe_span()
    assert span is not None
    span_id = span.context.span_id
    for item in (snapshot(span, 7), public_snapshot(span, 7)):
        assert item == (
            0x1F, span_id, 0x2F, "probe", 3, 1_000, 3_000, 2, "probe", 7, "hoptrace.probe", "1.0",
            3, "probe.str", "probe.int", "probe.list", "v", 7, ("a", "b"),
            1, "probe.event", 2_000, 1, "probe.float", 1.5,
            1, 0x3F, 0x4F, 1, "probe.link", True,
            None,
        )  # fmt: skip
        named = {
            name: item[getattr(fields, name)]
            for name in fields.__all__
            if name.isupper() and name != "ATTRIBUTES"
        }
        assert named == {
            "TRACE_ID": 0x1F,
            "SPAN_ID": span_id,
            "PARENT_SPAN_ID": 0x2F,
            "NAME": "probe",
            "KIND": 3,  # CLIENT
            "START_NS": 1_000,
            "END_NS": 3_000,
            "STATUS_CODE": 2,  # ERROR
            "STATUS_MESSAGE": "probe",
            "RESOURCE_KEY": 7,
            "SCOPE_NAME": "hoptrace.probe",
            "SCOPE_VERSION": "1.0",
            "TRACE_STATE": None,
        }
        assert item[fields.ATTRIBUTES] == 3


def test_a_full_batch_is_sent_before_the_delay_is_up():
    recorder = _Recorder()
    processor = SnapshotBatchProcessor(
        recorder, schedule_delay_millis=60_000, max_export_batch_size=4, max_queue_size=100
    )
    provider = _provider(processor)
    t = provider.get_tracer("test")
    for i in range(4):
        t.start_span(f"s{i}").end()
    batches = eventually(lambda: list(recorder.batches), lambda b: b == [4], deadline_s=5)
    assert batches == [4]
    provider.shutdown()


def test_spans_wait_for_the_delay_and_shutdown_sends_what_is_left():
    recorder = _Recorder()
    processor = SnapshotBatchProcessor(recorder, schedule_delay_millis=60_000)
    provider = _provider(processor)
    provider.get_tracer("test").start_span("late").end()
    assert recorder.batches == []  # neither a full batch nor the delay yet
    provider.shutdown()
    assert [s.name for s in recorder.spans()] == ["late"] and recorder.shut
    provider.get_tracer("test").start_span("after").end()  # ignored, no error
    assert not processor.force_flush()


def test_a_full_queue_drops_spans_counts_them_and_says_so_once(caplog):
    recorder = _Recorder()
    busy, release = threading.Event(), threading.Event()
    export = recorder.export_snapshots

    def slow_export(items, resources):  # the receiver is slow: the queue fills up
        busy.set()
        release.wait(10)
        export(items, resources)

    recorder.export_snapshots = slow_export  # type: ignore[method-assign]
    processor = SnapshotBatchProcessor(
        recorder, schedule_delay_millis=60_000, max_queue_size=3, max_export_batch_size=3
    )
    provider = _provider(processor)
    t = provider.get_tracer("test")
    with caplog.at_level(logging.WARNING, logger="tracer.sdk.batch"):
        for i in range(3):
            t.start_span(f"s{i}").end()
        assert busy.wait(5)  # the first full batch is being sent
        for i in range(3, 9):
            t.start_span(f"s{i}").end()
    release.set()
    assert processor.force_flush()
    assert sorted(s.name for s in recorder.spans()) == [f"s{i}" for i in range(6)]
    assert sum("queue is full" in r.getMessage() for r in caplog.records) == 1
    assert processor.drops.queue_full == processor.drops.total == 3
    provider.shutdown()


def test_the_otel_bsp_variables_set_the_batching(monkeypatch):
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
    recorder = _Recorder()
    provider = _provider(SnapshotBatchProcessor(recorder))
    t = provider.get_tracer("test")
    for i in range(2):
        t.start_span(f"s{i}").end()
    assert eventually(lambda: list(recorder.batches), lambda b: b == [2], deadline_s=5) == [2]
    provider.shutdown()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"schedule_delay_millis": 0},
        {"max_queue_size": 0},
        {"max_queue_size": 10, "max_export_batch_size": 20},
    ],
)
def test_bad_batching_settings_are_refused(kwargs):
    with pytest.raises(ValueError, match="must be"):
        SnapshotBatchProcessor(_Recorder(), **kwargs)


class _Calls(SpanProcessor):
    """Records every call a processor gets, by span name."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def on_start(self, span, parent_context=None) -> None:
        self.calls.append(("start", span.name))

    def _on_ending(self, span) -> None:
        self.calls.append(("ending", span.name))

    def on_end(self, span) -> None:
        self.calls.append(("end", span.name))


def test_the_routing_list_sends_spans_to_a_lone_snapshot_processor_then_to_every_processor():
    recorder = _Recorder()
    processor = SnapshotBatchProcessor(recorder, schedule_delay_millis=60_000)
    provider = TracerProvider(
        resource=Resource.create({"service.name": "svc"}),
        active_span_processor=RoutingSpanProcessor(),
    )
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test", "1.2")
    tracer.start_span("alone").end()
    calls = _Calls()
    provider.add_span_processor(calls)
    tracer.start_span("shared").end()
    assert processor.force_flush()
    assert sorted(s.name for s in recorder.spans()) == ["alone", "shared"]
    assert calls.calls == [("start", "shared"), ("ending", "shared"), ("end", "shared")]
    provider.shutdown()
    assert recorder.shut


def test_the_routing_list_exports_what_the_sdks_list_exports():
    def exported(active) -> list:
        recorder = _Recorder()
        processor = SnapshotBatchProcessor(recorder, schedule_delay_millis=60_000)
        provider = TracerProvider(
            resource=Resource.create({"service.name": "svc"}), active_span_processor=active
        )
        provider.add_span_processor(processor)
        _work(provider)
        assert processor.force_flush()
        provider.shutdown()
        return sorted(recorder.spans(), key=lambda s: s.name)

    routed, sdk = exported(RoutingSpanProcessor()), exported(None)
    assert [s.name for s in routed] == ["child", "parent"]

    def shape(s):  # all but the ids and times, which differ from run to run
        return (s.name, s.kind, s.service, s.status, s.attributes, s.first_token_ns is None)

    assert [shape(s) for s in routed] == [shape(s) for s in sdk]
