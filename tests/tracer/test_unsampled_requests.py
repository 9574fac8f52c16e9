"""A request of an unsampled trace makes no server span and keeps the caller's trace
context; sampled requests and roots get their server span as before."""

from __future__ import annotations

import asyncio

from fastapi import FastAPI
from opentelemetry import propagate
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import tracer
from tests.helpers import fresh_tracer_provider
from tracer.testing import call_asgi, capture_spans

_TRACE = "0af7651916cd43dd8448eb211c80319c"
_PARENT = "b7ad6b7169203331"


def _scope(traceparent: str | None) -> dict:
    headers = [(b"host", b"127.0.0.1:8000"), (b"content-length", b"0")]
    if traceparent is not None:
        headers.append((b"traceparent", traceparent.encode()))
        headers.append((b"tracestate", b"vendor=v1,ot=th:8"))
        headers.append((b"baggage", b"hoptrace.run=r1"))
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "root_path": "", "query_string": b"", "path": "/work",
        "raw_path": b"/work", "client": ("127.0.0.1", 50123), "server": ("127.0.0.1", 8000),
        "headers": headers,
    }  # fmt: skip


def test_an_unsampled_request_skips_its_server_span_but_not_its_trace_context():
    fresh_tracer_provider()
    try:
        tracer.setup("svc", sample_ratio=1.0, exporter=InMemorySpanExporter())
        app = FastAPI()
        seen: list[tuple[str, str, bool]] = []
        baggage: list[str | None] = []

        @app.get("/work")
        async def work() -> dict:
            with tracer.stage("auth") as stage:
                recording = stage.is_recording()
            carrier: dict[str, str] = {}
            propagate.inject(carrier)  # what a call to the next service would carry
            seen.append((carrier["traceparent"], carrier.get("tracestate", ""), recording))
            baggage.append(carrier.get("baggage"))
            return {}

        tracer.instrument_fastapi(app, stage="app")
        for flags in ("00", "01", None):
            parent = None if flags is None else f"00-{_TRACE}-{_PARENT}-{flags}"
            with capture_spans() as captured:
                sent = asyncio.run(call_asgi(app, _scope(parent), b""))
            assert sent[0]["status"] == 200
            servers = [s for s in captured.spans if s.kind == SpanKind.SERVER]
            stages = [s for s in captured.spans if s.name == "auth"]
            traceparent, tracestate, recording = seen[-1]
            assert baggage[-1] == (None if flags is None else "hoptrace.run=r1")
            if flags == "00":  # no span of ours; the next service is told the same
                assert servers == [] and stages == [] and not recording
                assert traceparent.startswith(f"00-{_TRACE}-")
                assert not int(traceparent[-2:], 16) & 1  # the sampled flag is off
                assert "vendor=v1" in tracestate and "ot=th:8" in tracestate
            else:
                assert len(servers) == 1 and len(stages) == 1 and recording
                assert int(traceparent[-2:], 16) & 1
                assert (format(servers[0].context.trace_id, "032x") == _TRACE) == (flags == "01")
    finally:
        tracer.shutdown()
        fresh_tracer_provider()


def test_a_request_that_starts_a_trace_is_decided_once_on_its_own_trace_id():
    from tracer.sampling.threshold import probability_to_threshold

    fresh_tracer_provider()
    low56 = (1 << 56) - 1
    threshold = probability_to_threshold(0.5)
    try:
        tracer.setup("svc", sample_ratio=0.5, exporter=InMemorySpanExporter())
        app = FastAPI()
        contexts = []

        @app.get("/work")
        async def work() -> dict:
            with tracer.stage("auth"):
                carrier: dict[str, str] = {}
                propagate.inject(carrier)
                contexts.append(carrier["traceparent"])
            return {}

        tracer.instrument_fastapi(app, stage="app")
        with capture_spans() as captured:
            for _ in range(200):
                assert asyncio.run(call_asgi(app, _scope(None), b""))[0]["status"] == 200
        servers = [s for s in captured.spans if s.kind == SpanKind.SERVER]
        stages = [s for s in captured.spans if s.name == "auth"]
        assert 60 <= len(servers) <= 140  # 100 expected, standard deviation 7
        assert len(stages) == len(servers)
        # every kept trace was kept by its own trace id's randomness, and says so
        assert all(s.context.trace_id & low56 >= threshold for s in servers)
        assert all(s.context.trace_state.get("ot") == "th:8" for s in servers)
        kept = {format(s.context.trace_id, "032x") for s in servers}
        for header in contexts:  # the dropped ones go on unsampled, on their own ids
            trace_id = header.split("-")[1]
            sampled = bool(int(header[-2:], 16) & 1)
            assert sampled == (trace_id in kept)
            assert sampled == (int(trace_id, 16) & low56 >= threshold)
    finally:
        tracer.shutdown()
        fresh_tracer_provider()
