"""Prompt and completion content is dropped at ingest unless the collector keeps it."""

from __future__ import annotations

from pathlib import Path

import httpx
import orjson
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from collector import BackgroundCollector
from tests.collector.test_receiver import _otlp_json
from tests.conftest import CollectorProcess
from tracer import attributes as attrs
from tracer.analysis import load
from tracer.spans.model import Span

PROMPT = "Tell me about the otters of Loch Hoptrace, sk-7f3a9c"
ANSWER = "The otters of Loch Hoptrace are fictional, q-51be0d"
#: The content keys each test span carries (one of each family the instrumentations use).
CONTENT = {
    "gen_ai.input.messages": orjson.dumps([{"role": "user", "content": PROMPT}]).decode(),
    "gen_ai.prompt.0.content": PROMPT,
    "input.value": PROMPT,
    "llm.input_messages.0.message.content": PROMPT,
    "output.value": ANSWER,
}
#: Ordinary attributes, some of them near the content keys in name; all must be kept.
ORDINARY = {
    attrs.GEN_AI_REQUEST_MODEL: "demo-model",
    attrs.GEN_AI_INPUT_TOKENS: 12,
    attrs.STAGE: "inference",
    "input.mime_type": "text/plain",
    "llm.token_count.prompt": 12,
}
#: An LLM call span: content and ordinary attributes together.
LLM_CALL = {**ORDINARY, **CONTENT}
JSON = {"content-type": "application/json"}
PROTO = {"content-type": "application/x-protobuf"}


def _llm_spans(service: str, n: int = 1) -> list:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    t = provider.get_tracer("test")
    for _ in range(n):
        with t.start_as_current_span("chat", kind=SpanKind.CLIENT, attributes=LLM_CALL):
            pass
        with t.start_as_current_span("plain", attributes=ORDINARY):
            pass
    for span in memory.get_finished_spans():
        if span.name == "chat":
            assert set(CONTENT) <= set(span.attributes or {})
    return list(memory.get_finished_spans())


def _post_both_formats(endpoint: str) -> int:
    """One OTLP JSON and one OTLP protobuf batch; returns how many spans were sent."""
    url = endpoint + "/v1/traces"
    json_spans = _llm_spans("json-client")
    proto_spans = _llm_spans("proto-client")
    response = httpx.post(url, content=orjson.dumps(_otlp_json(json_spans)), headers=JSON)
    assert response.status_code == 200, response.text
    response = httpx.post(url, content=encode_spans(proto_spans).SerializeToString(), headers=PROTO)
    assert response.status_code == 200, response.text
    return len(json_spans) + len(proto_spans)


def _loaded(store: Path) -> list[Span]:
    traces = load([store])
    return [s for spans in traces.traces.values() for s in spans]


def _store_bytes(store: Path) -> bytes:
    """The store file and any WAL or shared-memory file beside it, raw."""
    return b"".join(p.read_bytes() for p in sorted(store.parent.glob(store.name + "*")))


def _stop(proc: CollectorProcess) -> str:
    """Stop the collector (its store is closed and checkpointed); its stderr."""
    proc.stop()
    assert proc.proc.stderr is not None
    return proc.proc.stderr.read()


def test_content_attributes_are_dropped_at_ingest_by_default(tmp_path):
    proc = CollectorProcess(tmp_path / "spans.db")
    try:
        sent = _post_both_formats(proc.endpoint)
        health = proc.health()
    finally:
        stderr = _stop(proc)
    assert health["keep_content"] is False
    assert health["spans_stored"] == sent == 4
    assert health["content_attributes_dropped"] == 2 * len(CONTENT)
    assert "prompt and completion attributes: dropped" in stderr

    spans = _loaded(proc.store)
    assert len(spans) == sent
    assert {s.service for s in spans} == {"json-client", "proto-client"}
    for span in spans:
        assert not [k for k in span.attributes if attrs.is_content_key(k)], span.attributes
        assert PROMPT not in repr(span.attributes) and ANSWER not in repr(span.attributes)
    for span in spans:
        assert span.attributes == ORDINARY
        assert span.stage == "inference"
    raw = _store_bytes(proc.store)
    assert b"demo-model" in raw  # the search does see attribute values
    assert PROMPT.encode() not in raw and b"sk-7f3a9c" not in raw
    assert ANSWER.encode() not in raw and b"q-51be0d" not in raw


def test_content_attributes_are_kept_with_keep_content_flag(tmp_path):
    proc = CollectorProcess(tmp_path / "spans.db", "--keep-content")
    try:
        sent = _post_both_formats(proc.endpoint)
        health = proc.health()
    finally:
        stderr = _stop(proc)
    assert health["keep_content"] is True
    assert health["content_attributes_dropped"] == 0
    assert "prompt and completion attributes: kept" in stderr

    spans = _loaded(proc.store)
    assert len(spans) == sent
    chats = [s for s in spans if s.name == "chat"]
    assert len(chats) == 2
    for span in chats:
        assert span.attributes == LLM_CALL
    for span in (s for s in spans if s.name == "plain"):
        assert span.attributes == ORDINARY
    raw = _store_bytes(proc.store)
    assert b"sk-7f3a9c" in raw and b"q-51be0d" in raw


def test_content_attributes_are_kept_with_keep_content_env_var(tmp_path, monkeypatch):
    monkeypatch.setenv("HOPTRACE_KEEP_CONTENT", "true")
    proc = CollectorProcess(tmp_path / "spans.db")
    try:
        body = encode_spans(_llm_spans("env-client")).SerializeToString()
        response = httpx.post(proc.endpoint + "/v1/traces", content=body, headers=PROTO)
        assert response.status_code == 200, response.text
        health = proc.health()
    finally:
        stderr = _stop(proc)
    assert health["keep_content"] is True and health["content_attributes_dropped"] == 0
    assert "prompt and completion attributes: kept" in stderr
    (chat,) = [s for s in _loaded(proc.store) if s.name == "chat"]
    assert chat.attributes == LLM_CALL


@pytest.mark.parametrize("keep_content", [False, True])
def test_background_collector_content_follows_keep_content_keyword(tmp_path, keep_content):
    store = tmp_path / "spans.db"
    with BackgroundCollector(store, keep_content=keep_content) as collector:
        url = collector.endpoint + "/v1/traces"
        # Three batches: after the first, the receiver knows the ordinary keys, and
        # content keys must still be caught in the batches that follow.
        for i in range(3):
            body = orjson.dumps(_otlp_json(_llm_spans(f"bg-{i}", n=2)))
            assert httpx.post(url, content=body, headers=JSON).status_code == 200
        health = httpx.get(collector.endpoint + "/healthz").json()
    assert health["keep_content"] is keep_content
    assert health["content_attributes_dropped"] == (0 if keep_content else 6 * len(CONTENT))
    spans = _loaded(store)
    assert len(spans) == 12
    for span in spans:
        if span.name == "chat":
            assert span.attributes == (LLM_CALL if keep_content else ORDINARY)
        else:
            assert span.attributes == ORDINARY
    assert (b"sk-7f3a9c" in _store_bytes(store)) is keep_content
