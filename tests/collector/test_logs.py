"""Log-based events: the SDK's OTLP log exporter into a live ``hoptrace collect``.

The same LLM call is traced twice, once with its first-chunk mark and its usage as
span events and once as OTLP log records tied to the span (what GenAI instrumentations
emit now); the analysis must find the same TTFT and the same usage in both.
"""

from __future__ import annotations

import gzip

import httpx
import orjson
import pytest
from opentelemetry._logs import LogRecord
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind, set_span_in_context

from collector import SpanStore
from tests.conftest import CollectorProcess
from tests.helpers import eventually
from tracer import attributes as attrs
from tracer.analysis import TraceSet, analyze_sources, break_down, prepare
from tracer.analysis.loaders import load
from tracer.spans.model import Warnings

T0 = 1_780_000_000_000_000_000
MS = 1_000_000
USAGE = {
    attrs.GEN_AI_INPUT_TOKENS: 120,
    attrs.GEN_AI_OUTPUT_TOKENS: 48,
    attrs.GEN_AI_CACHE_READ_TOKENS: 96,
    "gen_ai.input.messages": "PROMPT-CANARY",
}


def _trace(tracer, logger, start_ns: int, as_logs: bool) -> str:
    """A server span with one LLM call span: first chunk at +37 ms, usage at the end."""
    root = tracer.start_span("POST /chat", kind=SpanKind.SERVER, start_time=start_ns)
    ctx = set_span_in_context(root)
    call = tracer.start_span(
        "chat demo-model",
        context=ctx,
        kind=SpanKind.CLIENT,
        start_time=start_ns + 2 * MS,
        attributes={attrs.GEN_AI_OPERATION_NAME: "chat", attrs.STAGE: "inference"},
    )
    first_ns, done_ns = start_ns + 37 * MS, start_ns + 90 * MS
    events = [
        (attrs.FIRST_TOKEN_EVENT, first_ns, {}),
        (attrs.GEN_AI_DETAILS_EVENT, done_ns, USAGE),
    ]
    for name, when, attributes in events:
        if as_logs:
            logger.emit(
                LogRecord(
                    timestamp=when,
                    context=set_span_in_context(call),
                    event_name=name,
                    attributes=attributes,
                    body="the body is never stored",
                )
            )
        else:
            call.add_event(name, attributes, timestamp=when)
    call.end(end_time=done_ns)
    root.end(end_time=start_ns + 95 * MS)
    return format(root.get_span_context().trace_id, "032x")


@pytest.fixture
def running(tmp_path):
    proc = CollectorProcess(tmp_path / "spans.db")
    try:
        yield proc
    finally:
        proc.stop()


def _summary(traces: TraceSet, trace_id: str) -> tuple:
    trace = prepare(trace_id, traces.traces[trace_id], Warnings())
    assert trace is not None
    b = break_down(trace)
    return b.ttft_ns, b.model_ttft_ns, b.input_tokens, b.output_tokens, b.groups


def test_log_events_give_the_same_ttft_and_usage_as_span_events(running, tmp_path):
    resource = Resource.create({"service.name": "chat-app"})
    tracers = TracerProvider(resource=resource)
    tracers.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=running.endpoint + "/v1/traces"))
    )
    loggers = LoggerProvider(resource=resource)
    loggers.add_log_record_processor(
        SimpleLogRecordProcessor(OTLPLogExporter(endpoint=running.endpoint + "/v1/logs"))
    )
    tracer, logger = tracers.get_tracer("test"), loggers.get_logger("test")
    as_spans = _trace(tracer, logger, T0, as_logs=False)
    as_logs = _trace(tracer, logger, T0 + 1000 * MS, as_logs=True)
    # A plain application log (no span) is not kept, and says so.
    logger.emit(LogRecord(timestamp=T0, body="hello", event_name="app.started"))
    tracers.force_flush()
    loggers.force_flush()
    health = eventually(running.health, lambda h: h["log_records_stored"] >= 2)
    assert health["log_records_stored"] == 2
    assert health["log_records_without_span"] == 1
    assert health["spans_stored"] == 4

    traces = load([running.store])
    spans_form, logs_form = _summary(traces, as_spans), _summary(traces, as_logs)
    assert spans_form == logs_form
    ttft, model_ttft, tin, tout, groups = logs_form
    assert ttft == 37 * MS and model_ttft == 35 * MS
    assert (tin, tout) == (120, 48)
    assert groups == {"other": 7 * MS, "inference": 88 * MS}
    call = next(s for s in traces.traces[as_logs] if s.name == "chat demo-model")
    assert call.attributes[attrs.GEN_AI_CACHE_READ_TOKENS] == 96
    # The store streamed in bounded memory (what 'hoptrace analyze' runs) reads the
    # events too: both traces, the same TTFT, usage and cached tokens.
    streamed, _ = analyze_sources([str(running.store)])
    assert streamed.ttft is not None and streamed.ttft.n == 2 and streamed.ttft.max == 37.0
    assert streamed.tokens is not None and streamed.tokens.input_total == 240
    assert streamed.cache is not None and streamed.cache.cached_total == 192
    running.stop()
    raw = (tmp_path / "spans.db").read_bytes()
    assert b"PROMPT-CANARY" not in raw and b"never stored" not in raw


def _logs_body(records: list[dict]) -> dict:
    return {"resourceLogs": [{"resource": {}, "scopeLogs": [{"logRecords": records}]}]}


def test_bad_log_records_are_rejected_with_partial_success(running):
    good = {
        "traceId": "ab" * 16,
        "spanId": "cd" * 8,
        "timeUnixNano": str(T0),
        "eventName": attrs.FIRST_TOKEN_EVENT,
    }
    bad_id = dict(good, spanId="xyz")
    no_span = {"timeUnixNano": str(T0), "eventName": "app.log"}
    named_by_attribute = {
        "traceId": "ab" * 16,
        "spanId": "ef" * 8,
        "observedTimeUnixNano": str(T0),
        "attributes": [{"key": "event.name", "value": {"stringValue": "hoptrace.first_token"}}],
    }
    body = _logs_body([good, bad_id, no_span, named_by_attribute])
    answer = httpx.post(
        running.endpoint + "/v1/logs",
        content=gzip.compress(orjson.dumps(body)),
        headers={"content-type": "application/json", "content-encoding": "gzip"},
    )
    assert answer.status_code == 200
    partial = answer.json()["partialSuccess"]
    assert partial["rejectedLogRecords"] == "2"
    assert "span id is not 16 hex digits" in partial["errorMessage"]
    assert "2 log records" not in partial["errorMessage"]  # one of each reason
    assert "without a trace and span id" in partial["errorMessage"]
    assert running.health()["log_records_stored"] == 2

    not_logs = httpx.post(
        running.endpoint + "/v1/logs",
        content=b'{"resourceSpans": []}',
        headers={"content-type": "application/json"},
    )
    assert not_logs.status_code == 400 and "resourceLogs" in not_logs.json()["message"]
    broken = httpx.post(
        running.endpoint + "/v1/logs",
        content=b"\x0a\xff\xff",
        headers={"content-type": "application/x-protobuf"},
    )
    assert broken.status_code == 400
    wrong_type = httpx.post(running.endpoint + "/v1/logs", content=b"{}")
    assert wrong_type.status_code == 415
    empty = httpx.post(
        running.endpoint + "/v1/logs",
        content=b"",
        headers={"content-type": "application/x-protobuf"},
    )
    assert empty.status_code == 200
    assert (
        ExportLogsServiceResponse.FromString(empty.content).partial_success.rejected_log_records
        == 0
    )
    with SpanStore(running.store) as store:
        stored = store.events_of(["ab" * 16])
    assert sorted(stored) == [("ab" * 16, "cd" * 8), ("ab" * 16, "ef" * 8)]


def test_log_files_are_a_source_merged_with_trace_files(tmp_path):
    trace_id, span_id = "12" * 16, "34" * 8
    spans = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "a"}}]
                },
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": trace_id,
                                "spanId": span_id,
                                "name": "chat m",
                                "kind": 3,
                                "startTimeUnixNano": str(T0),
                                "endTimeUnixNano": str(T0 + 50 * MS),
                                "attributes": [
                                    {
                                        "key": "gen_ai.operation.name",
                                        "value": {"stringValue": "chat"},
                                    }
                                ],
                            }
                        ]
                    }
                ],
            }
        ]
    }
    details = [
        {"key": attrs.GEN_AI_INPUT_TOKENS, "value": {"intValue": "7"}},
        {"key": attrs.GEN_AI_TIME_TO_FIRST_CHUNK, "value": {"doubleValue": 0.0125}},
    ]
    logs = _logs_body(
        [
            {
                "traceId": trace_id,
                "spanId": span_id,
                "timeUnixNano": str(T0 + 50 * MS),
                "eventName": attrs.GEN_AI_DETAILS_EVENT,
                "attributes": details,
            },
            {"traceId": "56" * 16, "spanId": span_id, "eventName": "x", "timeUnixNano": "1"},
        ]
    )
    (tmp_path / "traces.jsonl").write_bytes(orjson.dumps(spans) + b"\n")
    (tmp_path / "logs.jsonl").write_bytes(orjson.dumps(logs) + b"\n")
    traces = load([tmp_path / "traces.jsonl", tmp_path / "logs.jsonl"])
    ttft, model_ttft, tin, _, _ = _summary(traces, trace_id)
    assert (ttft, model_ttft, tin) == (12_500_000, 12_500_000, 7)
    assert any(
        "1 log records belong to spans that were not loaded" in m for m in traces.warnings.messages
    )


def test_logs_need_the_token_as_traces_do(tmp_path):
    proc = CollectorProcess(tmp_path / "spans.db", "--token", "s3cret")
    try:
        body = orjson.dumps(_logs_body([]))
        headers = {"content-type": "application/json"}
        refused = httpx.post(proc.endpoint + "/v1/logs", content=body, headers=headers)
        assert refused.status_code == 401
        headers["authorization"] = "Bearer s3cret"
        taken = httpx.post(proc.endpoint + "/v1/logs", content=body, headers=headers)
        assert taken.status_code == 200 and taken.json() == {}
        get = httpx.get(proc.endpoint + "/v1/logs", headers=headers)
        assert get.status_code == 405 and "takes POST" in get.json()["message"]
    finally:
        proc.stop()
