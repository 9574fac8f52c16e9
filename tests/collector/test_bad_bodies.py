"""Each bad body the collector met, answered as it should be, while good batches keep
arriving from other senders and are all stored."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from collector import MAX_VALUE_DEPTH, SpanStore
from tests.collector import bodies as b
from tests.conftest import CollectorProcess

DEEPER = f"nests deeper than {MAX_VALUE_DEPTH} levels"


@dataclass
class Case:
    body: bytes
    headers: dict[str, str]
    trace_ids: list[str]  # every trace the body holds
    stored: int  # spans of those traces the store must hold
    rejected: int  # spans the answer must report rejected
    reason: str  # part of the answer's error message


def _proto_case(change: Callable, reason: str) -> Case:
    request = b.proto_request(3)
    change(request.resource_spans[0].scope_spans[0].spans)
    trace = request.resource_spans[0].scope_spans[0].spans[0].trace_id.hex()
    return Case(request.SerializeToString(), b.PROTO, [trace], 2, 1, reason)


def _json_case(reason: str, deep: bytes | None = None, **span1: object) -> Case:
    batch = b.json_batch(3, span1=span1)
    trace = batch["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]
    return Case(b.dumps(batch, deep), b.JSON, [trace], 2, 1, reason)


#: An attribute whose value is the body's deep value (see :func:`bodies.dumps`).
_DEEP = {"attributes": [{"key": "deep", "value": b.DEEP}]}


def _set(index: int, field: str, value: object) -> Callable:
    return lambda spans: setattr(spans[index], field, value)


def _resource_not_an_object() -> Case:
    bad, good = b.json_batch(3), b.json_batch(2)
    bad["resourceSpans"][0]["resource"] = [1]
    traces = [r["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] for r in (bad, good)]
    body = b.dumps({"resourceSpans": bad["resourceSpans"] + good["resourceSpans"]})
    return Case(body, b.JSON, traces, 2, 3, "its resource is not an object")


def _two_gzip_members() -> Case:
    first, second = b.proto_request(3), b.proto_request(2)
    traces = [r.resource_spans[0].scope_spans[0].spans[0].trace_id.hex() for r in (first, second)]
    body = b.two_gzip_members(first.SerializeToString(), second.SerializeToString())
    return Case(body, {**b.PROTO, **b.GZIP}, traces, 5, 0, "")


def _wire_case(depth: int) -> Case:
    trace = b.new_trace_id()
    return Case(
        b.deep_proto_span_bytes(depth, trace_id=trace), b.PROTO, [trace.hex()], 2, 1, DEEPER
    )


CASES: dict[str, Callable[[], Case]] = {
    "protobuf time at 2^63": lambda: _proto_case(
        _set(1, "end_time_unix_nano", 2**63), "end time is not between 1970 and 2200"
    ),
    "JSON intValue wider than 64 bits": lambda: _json_case(
        "integer attribute value does not fit in 64 bits",
        attributes=[{"key": "n", "value": {"intValue": "9" * 30}}],
    ),
    "JSON arrayValue 300 deep": lambda: _json_case(
        DEEPER, b.nested_json_value(300, "arrayValue"), **_DEEP
    ),
    "JSON kvlistValue 250 deep": lambda: _json_case(
        DEEPER, b.nested_json_value(250, "kvlistValue"), **_DEEP
    ),
    "protobuf kvlist 90 deep": lambda: _wire_case(90),
    "JSON resource [1]": _resource_not_an_object,
    "gzip of two members": _two_gzip_members,
    "JSON trace id zzz": lambda: _json_case("trace id is not 32 hex digits", traceId="z" * 32),
    "JSON span id in unicode": lambda: _json_case("span id is not 16 hex", spanId="ä" * 16),
    "protobuf all-zero span id": lambda: _proto_case(
        _set(2, "span_id", bytes(8)), "span id is not 8 bytes or is all zeros"
    ),
    "protobuf 3-byte parent id": lambda: _proto_case(
        _set(2, "parent_span_id", b"abc"), "parent span id is not 8 bytes"
    ),
    "JSON parentSpanId of the wrong length": lambda: _json_case(
        "parent span id is not 16 hex digits", parentSpanId="0123456789abcdef01"
    ),
}


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CollectorProcess]:
    proc = CollectorProcess(tmp_path_factory.mktemp("bad") / "spans.db")
    try:
        yield proc
    finally:
        proc.stop()
    assert proc.proc.stderr is not None
    stderr = proc.proc.stderr.read()
    assert "Traceback" not in stderr and "Exception in ASGI" not in stderr, stderr


def _stored_per_trace(store: Path) -> Counter[str]:
    with SpanStore(store) as s:
        return Counter(span.trace_id for span in s.iter_spans())


def _send_good(url: str, n: int) -> list[str]:
    """Send ``n`` good 20-span batches; the trace ids of those answered 200 in full."""
    traces = []
    with httpx.Client() as client:
        for _ in range(n):
            request = b.proto_request(20)
            response = client.post(url, content=request.SerializeToString(), headers=b.PROTO)
            assert response.status_code == 200, response.text
            answer = ExportTraceServiceResponse.FromString(response.content)
            assert not answer.HasField("partial_success"), answer
            traces.append(request.resource_spans[0].scope_spans[0].spans[0].trace_id.hex())
    return traces


@pytest.mark.parametrize("name", list(CASES))
def test_bad_body_is_answered_as_stated_and_good_batches_are_all_stored(collector, name):
    url = collector.endpoint + "/v1/traces"
    cases = [CASES[name]() for _ in range(3)]
    with ThreadPoolExecutor(4) as pool:
        good = [pool.submit(_send_good, url, 10) for _ in range(4)]
        answers = [httpx.post(url, content=c.body, headers=c.headers) for c in cases]
        good_traces = [t for f in good for t in f.result()]
    for case, response in zip(cases, answers, strict=True):
        assert response.status_code == 200, response.text
        if case.headers["content-type"] == "application/json":
            partial = response.json().get("partialSuccess", {})
            rejected = int(partial.get("rejectedSpans", 0))
            message = partial.get("errorMessage", "")
        else:
            answer = ExportTraceServiceResponse.FromString(response.content)
            rejected = answer.partial_success.rejected_spans
            message = answer.partial_success.error_message
        assert rejected == case.rejected, message
        assert case.reason in message
    stored = _stored_per_trace(collector.store)
    assert [stored[t] for t in good_traces] == [20] * 40
    for case in cases:
        assert sum(stored[t] for t in case.trace_ids) == case.stored
