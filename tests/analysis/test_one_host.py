"""A two-service streaming app on one host, exported into the real receiver: its server
spans end a little after their client spans (the stream's last chunk), which is not
clock skew."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from tests.analysis.one_host_app import CHUNKS
from tests.conftest import free_port, wait_http
from tests.helpers import eventually
from tracer.analysis import analyze, load
from tracer.spans.model import KIND_CLIENT

REQUESTS = 30
ROOT = Path(__file__).resolve().parents[2]


def _serve(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.analysis.one_host_app", *args], env=env, cwd=ROOT
    )


def _stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGINT)  # uvicorn stops; the tracer flushes on the way out
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_a_stream_between_two_services_on_one_host_is_not_taken_for_clock_skew(
    collector_process,
):
    model_port, front_port = free_port(), free_port()
    model = _serve("model", str(model_port), collector_process.endpoint)
    front = _serve(
        "front", str(front_port), collector_process.endpoint, f"http://127.0.0.1:{model_port}"
    )
    try:
        wait_http(f"http://127.0.0.1:{model_port}/docs", proc=model)
        wait_http(f"http://127.0.0.1:{front_port}/docs", proc=front)
        with httpx.Client(timeout=10) as client:
            for _ in range(REQUESTS):
                body = client.get(f"http://127.0.0.1:{front_port}/ask").text
                assert body.count("token") == CHUNKS
    finally:
        _stop(front)
        _stop(model)
    # Two SERVER spans and one CLIENT span a request (the docs pages are not traced).
    traces = eventually(
        lambda: load([collector_process.store]),
        lambda ts: sum(len(t) for t in ts.traces.values()) >= 3 * REQUESTS,
    )
    overran = 0
    for spans in traces.traces.values():
        for c in (s for s in spans if s.kind == KIND_CLIENT):
            server = next(s for s in spans if s.parent_id == c.span_id)
            overran += server.end_ns > c.end_ns
    assert overran > REQUESTS // 2  # the case: server spans that end after their client's
    result = analyze(traces)
    assert result.traces == REQUESTS
    assert result.warnings.skew_adjusted == 0
