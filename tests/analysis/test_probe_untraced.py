"""Pointing hoptrace at a traced application by mistake leaves no traces in it: its
requests carry an unsampled ``traceparent``, which a parent-based sampler (the
OpenTelemetry default) records nothing of."""

from __future__ import annotations

import threading

import pytest
import uvicorn
from fastapi import FastAPI
from opentelemetry.trace import SpanKind

import tracer
from tests.conftest import free_port, wait_http
from tracer._errors import SourceError
from tracer.analysis.loaders.url import resolve_backend
from tracer.testing import capture_spans


@pytest.fixture(scope="module")
def traced_app():
    app = FastAPI()

    @app.get("/{path:path}")
    async def anything(path: str) -> dict:
        return {"path": path}

    tracer.instrument_fastapi(app, stage="gateway", excluded_urls="docs")
    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    wait_http(f"http://127.0.0.1:{port}/docs")
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)


def test_probing_a_traced_application_records_no_trace_in_it(traced_app):
    import httpx

    with capture_spans() as probed:
        with pytest.raises(SourceError, match="answers neither as Grafana Tempo"):
            resolve_backend(traced_app)
    with capture_spans() as plain:  # the same app does trace an ordinary request
        assert httpx.get(traced_app + "/api/echo").status_code == 200
    assert [s for s in plain.spans if s.kind == SpanKind.SERVER]
    assert [s.name for s in probed.spans] == []  # four probes answered, none recorded
