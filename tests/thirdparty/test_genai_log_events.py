"""A real GenAI instrumentation that emits its events as OTLP log records.

``opentelemetry-instrumentation-openai-v2`` (through ``opentelemetry-util-genai``)
emits ``gen_ai.client.inference.operation.details`` as a log record tied to the
chat span when ``OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT=true``, with the call's usage
(and time to first chunk, when it measures one: for the openai SDK's streams this
version does not), and with the messages when content capture is on. Here it
traces the openai SDK against the demo's model server, sending spans and logs to a
live ``hoptrace collect``. What must hold: every chat span's log record is kept with
it, the record alone gives the span the same TTFT and usage as its own attributes
(the same answer in either form), and the prompt never reaches the store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from collector import SpanStore
from tests.conftest import CollectorProcess, wait_http
from tests.helpers import eventually
from tracer import attributes as attrs
from tracer.analysis import break_down, prepare
from tracer.analysis.loaders import load
from tracer.spans.events import DETAIL_KEYS, with_events
from tracer.spans.model import Warnings

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
REQUESTS = 3


@pytest.fixture
def model_server(tmp_path):
    from collector.server import free_port

    port = free_port()
    env = dict(os.environ, OTEL_SDK_DISABLED="true")
    proc = subprocess.Popen(
        [sys.executable, "-m", "demo_app.serve_one", "model", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", proc=proc)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_openai_v2_log_events_reach_the_analysis_like_span_attributes(tmp_path, model_server):
    collector = CollectorProcess(tmp_path / "spans.db")
    try:
        env = dict(
            os.environ,
            OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT="true",
            OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="EVENT_ONLY",
            OTEL_SEMCONV_STABILITY_OPT_IN="gen_ai_latest_experimental",
        )
        done = subprocess.run(
            [
                sys.executable,
                str(HERE / "_log_client.py"),
                model_server,
                collector.endpoint,
                "--requests",
                str(REQUESTS),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        requests = [json.loads(line) for line in done.stdout.splitlines()]
        assert len(requests) == REQUESTS
        health = eventually(collector.health, lambda h: h["log_records_stored"] >= REQUESTS)
        assert health["log_records_stored"] == REQUESTS
        assert health["content_attributes_dropped"] >= REQUESTS
    finally:
        collector.stop()
    ids = [r["trace_id"] for r in requests]
    traces = load([collector.store], trace_ids=ids)
    with SpanStore(collector.store) as store:
        events = store.events_of(ids)
    for r in requests:
        spans = traces.traces[r["trace_id"]]
        chat = next(s for s in spans if s.attributes.get(attrs.GEN_AI_OPERATION_NAME) == "chat")
        own = events[(chat.trace_id, chat.span_id)]
        assert [name for name, _, _ in own] == [attrs.GEN_AI_DETAILS_EVENT]
        # The span without what the event repeats, given only the event: same answer.
        bare = msgspec.structs.replace(
            chat,
            first_token_ns=None,
            attributes={k: v for k, v in chat.attributes.items() if k not in DETAIL_KEYS},
        )
        rebuilt = with_events(bare, own)
        assert rebuilt.first_token_ns == chat.first_token_ns
        for key in (attrs.GEN_AI_INPUT_TOKENS, attrs.GEN_AI_OUTPUT_TOKENS):
            assert rebuilt.attributes[key] == chat.attributes[key] > 0
        trace = prepare(r["trace_id"], spans, Warnings())
        assert trace is not None
        b = break_down(trace)
        assert (b.input_tokens, b.output_tokens) == (
            rebuilt.attributes[attrs.GEN_AI_INPUT_TOKENS],
            6,
        )
        assert r["start_ns"] <= chat.start_ns < chat.end_ns <= r["done_ns"]
    assert b"PROMPT-CANARY-LOGS" not in (tmp_path / "spans.db").read_bytes()
