"""What the instrumentation records for a model of the load: process CPU on server
spans, the cores and host on the resource, and finite pools on the spans that held
a slot."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
import uuid

from fastapi import FastAPI, HTTPException
from fastapi.responses import StreamingResponse
from opentelemetry import trace
from opentelemetry.trace import SpanKind

import tracer
from demo_app import gateway as demo_gateway
from demo_app import model as demo_model
from demo_app.profiles import get_profile
from tracer import attributes as attrs
from tracer.instrument.load import load_resource_attributes, process_cpus
from tracer.sdk.setup import make_resource
from tracer.testing import call_asgi, capture_spans

BURN_NS = 20_000_000  # 20 ms of CPU in the handler


def _scope(path: str, body: bytes = b"{}", headers: list | None = None) -> dict:
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "root_path": "", "query_string": b"", "path": path,
        "raw_path": path.encode(), "client": ("127.0.0.1", 50123),
        "server": ("127.0.0.1", 8000),
        "headers": [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()), *(headers or [])],
    }  # fmt: skip


def _burn(cpu_ns: int) -> None:
    end = time.process_time_ns() + cpu_ns
    while time.process_time_ns() < end:
        pass


def _burning_app() -> FastAPI:
    app = FastAPI()

    @app.post("/burn")
    async def burn() -> dict:
        _burn(BURN_NS)
        return {"ok": True}

    @app.post("/stream")
    async def stream() -> StreamingResponse:
        async def body():
            yield b"a"
            _burn(BURN_NS)  # after the first chunk: still inside the server span
            yield b"b"

        return StreamingResponse(body(), media_type="text/plain")

    @app.post("/fail")
    async def fail() -> dict:
        _burn(BURN_NS)
        raise RuntimeError("boom")

    @app.post("/missing")
    async def missing() -> dict:
        raise HTTPException(404, "no such thing")

    return app


def _server_spans(app, path: str, body: bytes = b"{}", headers: list | None = None):
    with capture_spans() as captured:
        before = time.process_time_ns()
        try:
            asyncio.run(call_asgi(app, _scope(path, body, headers), body))
        except RuntimeError:
            pass  # the app's own error, re-raised by the server middleware
        after = time.process_time_ns()
    spans = [s for s in captured.spans if s.kind == SpanKind.SERVER]
    return spans, captured, before, after


def test_server_span_records_process_cpu_during_the_request():
    with capture_spans():
        app = tracer.instrument_fastapi(_burning_app(), stage="gateway")
    for path in ("/burn", "/stream", "/fail"):
        (span,), _, before, after = _server_spans(app, path)
        cpu_ns = span.attributes[attrs.PROCESS_CPU_NS]
        total_ns = span.attributes[attrs.PROCESS_CPU_TOTAL_NS]
        wall_ns = span.end_time - span.start_time
        assert BURN_NS <= cpu_ns <= wall_ns * (os.cpu_count() or 1), path
        assert before + cpu_ns <= total_ns <= after, path


def test_server_span_repeats_the_process_identity_of_its_resource():
    with capture_spans():
        app = tracer.instrument_fastapi(_burning_app())
    (span,), _, _, _ = _server_spans(app, "/burn")
    (again,), _, _, _ = _server_spans(app, "/burn")
    resource = dict(span.resource.attributes)
    instance = span.attributes[attrs.SERVICE_INSTANCE_ID]
    # The resource's instance when it has one, else one id for this process.
    assert instance == resource.get(attrs.SERVICE_INSTANCE_ID, instance)
    assert uuid.UUID(str(instance)) and again.attributes[attrs.SERVICE_INSTANCE_ID] == instance
    assert span.attributes[attrs.HOST_NAME] == resource.get(attrs.HOST_NAME, socket.gethostname())
    assert span.attributes[attrs.HOST_CPUS] == os.cpu_count()
    assert span.attributes[attrs.PROCESS_CPUS] == process_cpus()


def test_server_span_records_cpu_when_the_app_answers_an_error():
    with capture_spans():
        app = tracer.instrument_fastapi(_burning_app())
    (span,), _, _, _ = _server_spans(app, "/missing")
    assert span.attributes[attrs.PROCESS_CPU_NS] >= 0
    assert span.attributes["http.status_code"] == 404


def test_cumulative_cpu_gives_the_busy_cores_between_two_requests():
    with capture_spans():
        app = tracer.instrument_fastapi(_burning_app())
    (first,), _, _, _ = _server_spans(app, "/burn")
    (second,), _, _, _ = _server_spans(app, "/burn")
    cpu_ns = (
        second.attributes[attrs.PROCESS_CPU_TOTAL_NS] - first.attributes[attrs.PROCESS_CPU_TOTAL_NS]
    )
    window_ns = second.end_time - first.end_time
    assert cpu_ns >= second.attributes[attrs.PROCESS_CPU_NS] >= BURN_NS
    assert 0 < cpu_ns / window_ns <= os.cpu_count()


def test_server_span_has_no_cpu_attributes_when_switched_off():
    with capture_spans():
        app = tracer.instrument_fastapi(_burning_app(), record_cpu=False)
    (span,), _, _, _ = _server_spans(app, "/burn")
    assert attrs.PROCESS_CPU_NS not in span.attributes
    assert attrs.PROCESS_CPU_TOTAL_NS not in span.attributes


def test_an_app_already_serving_is_instrumented_without_cpu(caplog):
    app = _burning_app()
    app.middleware_stack = app.build_middleware_stack()  # as the first request does
    with capture_spans():
        assert tracer.instrument_fastapi(app) is app
    assert "its server spans carry no CPU" in caplog.text


def test_process_cpus_is_the_affinity_bounded_by_the_cgroup_quota(tmp_path):
    affinity = float(len(os.sched_getaffinity(0)))
    proc = tmp_path / "cgroup"
    proc.write_text("0::/svc/worker\n")
    (tmp_path / "fs" / "svc" / "worker").mkdir(parents=True)
    root = tmp_path / "fs"
    assert process_cpus(root, proc) == affinity  # no cpu.max anywhere
    (root / "svc" / "worker" / "cpu.max").write_text("max 100000\n")
    assert process_cpus(root, proc) == affinity
    (root / "svc" / "cpu.max").write_text("50000 100000\n")  # an ancestor's quota applies
    assert process_cpus(root, proc) == min(affinity, 0.5)
    (root / "svc" / "worker" / "cpu.max").write_text("25000 100000\n")
    assert process_cpus(root, proc) == min(affinity, 0.25)


def test_process_cpus_is_the_affinity_without_cgroup_v2(tmp_path):
    proc = tmp_path / "cgroup"
    proc.write_text("1:cpu:/\n")
    assert process_cpus(tmp_path, proc) == float(len(os.sched_getaffinity(0)))
    assert process_cpus(tmp_path, tmp_path / "absent") == float(len(os.sched_getaffinity(0)))


def test_load_resource_attributes_fill_only_what_is_missing():
    added = load_resource_attributes({attrs.HOST_NAME: "box-1"})
    assert attrs.HOST_NAME not in added
    assert uuid.UUID(added[attrs.SERVICE_INSTANCE_ID]).version == 4
    assert added[attrs.HOST_CPUS] == os.cpu_count()
    assert 0 < added[attrs.PROCESS_CPUS] <= os.cpu_count()
    assert load_resource_attributes({key: 1 for key in added} | {attrs.HOST_NAME: "b"}) == {}


def test_setup_resource_carries_the_load_attributes(monkeypatch):
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "host.name=from-env")
    values = dict(make_resource("svc").attributes)
    assert values[attrs.HOST_NAME] == "from-env"  # the user's value wins
    assert values[attrs.SERVICE_NAME] == "svc"
    assert uuid.UUID(str(values[attrs.SERVICE_INSTANCE_ID])).version == 4
    assert values[attrs.HOST_CPUS] == os.cpu_count()
    assert values[attrs.PROCESS_CPUS] == process_cpus()
    given = dict(make_resource("svc", {attrs.SERVICE_INSTANCE_ID: "svc-1"}).attributes)
    assert given[attrs.SERVICE_INSTANCE_ID] == "svc-1"


def test_record_pool_marks_the_current_span():
    with capture_spans() as captured:
        with tracer.stage("gateway", span_name="held"):
            tracer.record_pool("gateway", 8, 1_500_000)
        with tracer.stage("gateway", span_name="clamped"):
            tracer.record_pool("gateway", 8, -5)
    held = captured.named("held").attributes
    assert (held[attrs.POOL_NAME], held[attrs.POOL_SIZE], held[attrs.POOL_WAIT_NS]) == (
        "gateway",
        8,
        1_500_000,
    )
    assert captured.named("clamped").attributes[attrs.POOL_WAIT_NS] == 0


def test_record_pool_outside_a_span_records_nothing_and_inside_one_records_the_pool():
    otel = trace.get_tracer("test")
    with capture_spans() as captured:
        tracer.record_pool("gateway", 8, 10)  # no current span: nothing to record on
        with otel.start_as_current_span("after"):
            pass
        with otel.start_as_current_span("held"):
            tracer.record_pool("gateway", 8, -5)
    after, held = sorted(captured.spans, key=lambda s: s.name)
    assert not {attrs.POOL_NAME, attrs.POOL_SIZE, attrs.POOL_WAIT_NS} & set(after.attributes)
    assert held.attributes[attrs.POOL_NAME] == "gateway"
    assert held.attributes[attrs.POOL_SIZE] == 8
    assert held.attributes[attrs.POOL_WAIT_NS] == 0  # a negative wait is none


def test_demo_gateway_server_span_records_its_worker_pool():
    config = demo_gateway.GatewayConfig(api_keys=["k"], max_concurrency=3, upstream_timeout_s=2)
    with capture_spans():
        app = demo_gateway.create_gateway_app(
            get_profile("bare"), "http://127.0.0.1:9", config
        )  # nothing listens upstream: 502 after the pool was taken
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
    spans, _, _, _ = _server_spans(
        app, "/v1/chat/completions", body, [(b"authorization", b"Bearer k")]
    )
    (span,) = spans
    values = span.attributes
    assert values["http.status_code"] == 502
    assert (values[attrs.POOL_NAME], values[attrs.POOL_SIZE]) == (demo_gateway.POOL, 3)
    assert 0 <= values[attrs.POOL_WAIT_NS] < span.end_time - span.start_time
    assert values[attrs.PROCESS_CPU_NS] > 0


def test_demo_model_inference_span_records_its_engine_slots():
    with capture_spans():
        app = demo_model.create_model_app(get_profile("bare"))
    body = json.dumps(
        {"model": "sim-1", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}
    ).encode()
    spans, captured, _, _ = _server_spans(app, "/v1/chat/completions", body)
    (inference,) = [s for s in captured.spans if s.name == "generate sim-1"]
    values = inference.attributes
    assert (values[attrs.POOL_NAME], values[attrs.POOL_SIZE]) == (
        demo_model.POOL,
        demo_model.BATCH_SLOTS,
    )
    queue_s = values[attrs.GEN_AI_LATENCY_QUEUE]
    assert abs(values[attrs.POOL_WAIT_NS] - queue_s * 1e9) <= 1
    (server,) = spans
    assert server.attributes[attrs.PROCESS_CPU_NS] > 0
