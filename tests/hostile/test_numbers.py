"""A number the analysis cannot convert costs its span or its attribute, never the store
or the file: refused alone at the collector, dropped and counted by the loaders."""

from __future__ import annotations

from pathlib import Path

import httpx
import orjson
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from collector import SpanStore
from tests.collector import bodies
from tests.conftest import CollectorProcess
from tests.helpers import hoptrace
from tests.hostile.spans import T0, TRACE, batch, double, span, trio
from tracer import attributes as attrs
from tracer.spans.model import Span

PREFILL = attrs.GEN_AI_LATENCY_PREFILL


def _proto_with_prefill(value: float) -> bytes:
    request = bodies.proto_request(3)
    kv = request.resource_spans[0].scope_spans[0].spans[2].attributes.add()
    kv.key, kv.value.double_value = PREFILL, value
    return request.SerializeToString()


def _no_traceback(result) -> None:
    assert "Traceback" not in result.stderr and "Error:" not in result.stderr.split(":")[0]


@pytest.mark.parametrize("encoding", ["json", "protobuf"])
def test_a_span_of_1e300_is_refused_alone_by_a_live_collector_and_its_store_stays_readable(
    tmp_path: Path, encoding: str
):
    store = tmp_path / "spans.db"
    collector = CollectorProcess(store)
    try:
        if encoding == "json":
            body = orjson.dumps(trio(double(PREFILL, 1e300)))
            answer = httpx.post(
                collector.endpoint + "/v1/traces", content=body, headers=bodies.JSON
            )
            assert answer.status_code == 200
            partial = answer.json()["partialSuccess"]
            rejected, message = int(partial["rejectedSpans"]), partial["errorMessage"]
        else:
            body = _proto_with_prefill(1e300)
            answer = httpx.post(
                collector.endpoint + "/v1/traces", content=body, headers=bodies.PROTO
            )
            assert answer.status_code == 200
            reply = ExportTraceServiceResponse.FromString(answer.content)
            rejected = reply.partial_success.rejected_spans
            message = reply.partial_success.error_message
        assert rejected == 1
        assert PREFILL in message and "1e+300" in message
    finally:
        collector.stop()
    with SpanStore(store) as opened:
        assert opened.count() == 2
    for command in (["analyze"], ["whatif", "--stage", "inference", "--speedup", "2"]):
        result = hoptrace(*command, str(store))
        assert result.returncode == 0, result.stderr
        _no_traceback(result)


def test_a_store_that_already_holds_1e300_is_read_with_a_warning(tmp_path: Path):
    store = tmp_path / "spans.db"
    spans = [
        Span(TRACE, "1" * 16, None, "svc", "root", 2, T0, T0 + 5_000_000),
        Span(
            TRACE, "2" * 16, "1" * 16, "svc", "llm", 3, T0, T0 + 4_000_000,
            stage="inference",
            attributes={PREFILL: 1e300, attrs.GEN_AI_INPUT_TOKENS: 1e300},
        ),
        Span(TRACE, "3" * 16, "1" * 16, "svc", "late", 3, T0, 2**63 - 1),
    ]  # fmt: skip
    with SpanStore(store, create=True) as opened:
        opened.write(spans)
    for command in (
        ["analyze"],
        ["whatif", "--stage", "inference", "--speedup", "2"],
        ["report", "-o", str(tmp_path / "r.html")],
    ):
        result = hoptrace(*command, str(store))
        assert result.returncode == 0, result.stderr
        _no_traceback(result)
    result = hoptrace("analyze", str(store))
    assert f"attributes dropped: {PREFILL}" in result.stdout
    assert "spans with times outside 1970..2200 were skipped" in result.stdout
    assert "7.5e+12" not in result.stdout and "7500000000000" not in result.stdout


_BAD_FILES = {
    "an infinite latency": batch(
        [span("1" * 16), span("2" * 16, "1" * 16, [double(PREFILL, "Infinity")])]
    ),
    "a latency of 1e400": batch(
        [span("1" * 16), span("2" * 16, "1" * 16, [double(attrs.GEN_AI_LATENCY_DECODE, "1e400")])]
    ),
    "an llm-d prefill of 1e300 ms": batch(
        [span("1" * 16), span("2" * 16, "1" * 16, [double(attrs.LLMD_PREFILL_MS, 1e300)])]
    ),
    "a token count of 1e400": batch(
        [span("1" * 16), span("2" * 16, "1" * 16, [double(attrs.GEN_AI_INPUT_TOKENS, "1e400")])]
    ),
    "a token count of 1e300": batch(
        [span("1" * 16), span("2" * 16, "1" * 16, [double(attrs.GEN_AI_OUTPUT_TOKENS, 1e300)])]
    ),
    "a TGI queue time of 1e400 seconds": batch(
        [
            span("1" * 16),
            span(
                "2" * 16,
                "1" * 16,
                [{"key": attrs.TGI_QUEUE_TIME, "value": {"stringValue": "9" * 401 + "s"}}],
            ),
        ]
    ),
    "a time in the year 2300": batch(
        [span("1" * 16), span("2" * 16, "1" * 16, start=T0, end=10_413_792_000 * 10**9)]
    ),
    "a time of int64 max": batch(
        [span("1" * 16), span("2" * 16, "1" * 16, start=T0, end=2**63 - 1)]
    ),
    "a Jaeger startTime of 1e19": {
        "data": [
            {
                "traceID": TRACE,
                "processes": {"p1": {"serviceName": "svc"}},
                "spans": [
                    {
                        "traceID": TRACE,
                        "spanID": "1" * 16,
                        "operationName": "root",
                        "startTime": T0 // 1000,
                        "duration": 5000,
                        "processID": "p1",
                    },
                    {
                        "traceID": TRACE,
                        "spanID": "2" * 16,
                        "operationName": "late",
                        "startTime": 1e19,
                        "duration": 5,
                        "processID": "p1",
                        "references": [{"refType": "CHILD_OF", "spanID": "1" * 16}],
                    },
                ],
            }
        ]
    },  # fmt: skip
}


@pytest.mark.parametrize("case", sorted(_BAD_FILES))
def test_a_file_with_an_unusable_number_is_analysed_with_a_warning(tmp_path: Path, case: str):
    path = tmp_path / "trace.json"
    path.write_bytes(orjson.dumps(_BAD_FILES[case]) + b"\n")
    result = hoptrace("analyze", str(path))
    assert result.returncode == 0, result.stderr
    _no_traceback(result)
    assert "values dropped: 1" in result.stdout or "skipped spans: 1" in result.stdout
    assert "n=1" in result.stdout  # the trace itself is analysed
    assert "5.0 ms" in result.stdout  # and reported at its real length
