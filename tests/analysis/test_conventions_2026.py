"""The conventions of 2026, each from its producer's published shape, through the OTLP
JSON loader. Stages and sub-stages are checked to the microsecond (times below are ms
with three decimals from T0; docs/conventions.md names each source):

- OpenTelemetry GenAI (open-telemetry/semantic-conventions-genai model/gen-ai/spans.yaml
  at 7e7e4e7): invoke_agent, execute_tool, chat, and the guardrail spans;
- vLLM (vllm/tracing/utils.py: SpanAttributes, latest_gen_ai_semconv_attributes):
  ``chat {model}`` with gen_ai.operation.name under gen_ai_latest_experimental;
- LiteLLM's proxy (docs.litellm.ai observability/opentelemetry_v2; issue 35193);
- llm-d (docs/proposals/distributed-tracing.md; llm-d-inference-scheduler
  pkg/sidecar/proxy: ``prefill`` then ``decode`` started in prefill's context);
- SGLang (python/sglang/srt/tracing/trace.py at bad7b92: request, thread and slice
  spans);
- NVIDIA Dynamo (frontend ``http-request``, worker ``handle_payload``).
"""

from __future__ import annotations

import orjson

from tests.analysis.test_batch_differential import _both
from tests.analysis.test_engines import CLIENT, INTERNAL, SERVER, load_docs, otlp, span
from tracer import attributes as attrs
from tracer.analysis import analyze, break_down, prepare
from tracer.analysis.substages import covers
from tracer.spans.model import Warnings

US = 1_000


def _one(tmp_path, trace_id: str, by_service: dict):
    traces = load_docs(tmp_path, otlp(trace_id, by_service))
    trace = prepare(trace_id, traces.traces[trace_id], Warnings())
    assert trace is not None
    return traces, trace, break_down(trace)


def _us(groups: dict[str, int]) -> dict[str, int]:
    """Groups in whole microseconds (they must be exact)."""
    assert all(v % US == 0 for v in groups.values()), groups
    return {k: v // US for k, v in groups.items() if v}


def _stage_of(trace, name: str) -> str:
    return next(trace.stage[i] for i, s in enumerate(trace.spans) if s.name == name)


def _genai() -> dict:
    root = span("POST /ask", SERVER, 0, 100)
    agent = span(
        "invoke_agent travel", INTERNAL, 1, 99, root, {"gen_ai.operation.name": "invoke_agent"}
    )
    guard = span(
        "apply_guardrail input", INTERNAL, 1.5, 4.25, agent,
        {"gen_ai.operation.name": "apply_guardrail"},
    )  # fmt: skip
    usage = {
        "gen_ai.operation.name": "chat",
        attrs.GEN_AI_INPUT_TOKENS: 1000,
        attrs.GEN_AI_OUTPUT_TOKENS: 40,
        attrs.GEN_AI_CACHE_READ_TOKENS: 800,
        attrs.GEN_AI_CACHE_WRITE_TOKENS: 200,
        attrs.GEN_AI_REASONING_TOKENS: 12,
    }
    chat1 = span("chat gpt-4o", CLIENT, 5, 40.125, agent, usage)
    tool = span(
        "execute_tool get_weather", INTERNAL, 41, 60.5, agent,
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather"},
    )  # fmt: skip
    chat2 = span(
        "chat gpt-4o", CLIENT, 61, 95, agent, dict(usage, **{"gen_ai.usage.input_tokens": 1100})
    )
    return {"agent-app": [root, agent, guard, chat1, tool, chat2]}


def test_genai_agent_tool_and_guardrail_spans_get_stages_of_their_own(tmp_path):
    _, trace, b = _one(tmp_path, "a1" * 16, _genai())
    assert _us(b.groups) == {
        "other": 8_625,  # the server and the agent's own time: the agent is no model call
        "guardrail": 2_750,
        "inference": 35_125 + 34_000,
        "tool": 19_500,
    }
    assert _stage_of(trace, "invoke_agent travel") == "other"
    assert (b.input_tokens, b.output_tokens, b.cached_tokens) == (2100, 80, 1600)
    assert "guardrail" in attrs.CANONICAL_STAGES and "tool" in attrs.CANONICAL_STAGES


def _vllm(name: str, parent, extra: dict) -> dict:
    return span(
        name, SERVER, 1, 59, parent,
        {
            attrs.GEN_AI_LATENCY_TTFT: 0.0125,
            attrs.GEN_AI_LATENCY_QUEUE: 0.002,
            attrs.GEN_AI_LATENCY_PREFILL: 0.0085,
            attrs.GEN_AI_LATENCY_DECODE: 0.0445,
            attrs.GEN_AI_PROMPT_TOKENS: 512,
            attrs.GEN_AI_COMPLETION_TOKENS: 64,
            **extra,
        },
    )  # fmt: skip


def test_vllm_chat_span_of_the_latest_conventions_is_an_engine_request(tmp_path):
    new_keys = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "llama-3-8b",
        attrs.GEN_AI_LATENCY_SCHEDULER: 0.0011,
        attrs.GEN_AI_LATENCY_FORWARD: 0.031,
        attrs.GEN_AI_LATENCY_EXECUTE: 0.036,
    }
    results = []
    for n, (name, extra) in enumerate((("llm_request", {}), ("chat llama-3-8b", new_keys))):
        call = span("POST /v1/chat/completions", CLIENT, 0, 60)
        engine = _vllm(name, call, extra)
        _, trace, b = _one(tmp_path, f"b{n}" * 16, {"gateway": [call], "vllm": [engine]})
        results.append((_us(b.groups), b.model_ttft_ns, b.input_tokens))
        assert _stage_of(trace, name) == "inference"
    assert results[0] == results[1]
    assert results[1] == (
        {
            "network": 2_000,
            "inference.queue": 2_000,
            "inference.prefill": 8_500,
            "inference.decode": 44_500,
            "inference": 3_000,
        },
        12_500_000,
        512,
    )
    # The new keys alone make a span an engine request (no interval: they are totals).
    only = span("chat llama-3-8b", SERVER, 1, 59, None, new_keys)
    _, trace, b = _one(tmp_path, "b9" * 16, {"vllm": [only]})
    assert _us(b.groups) == {"inference": 58_000}


def _litellm() -> dict:
    leak = {"gen_ai.request.model": "gpt-4o"}  # LiteLLM issue 35193: on spans of no model call
    root = span("POST /v1/chat/completions", SERVER, 0, 50)
    auth = span("auth get_key_object", INTERNAL, 0.5, 2.25, root, leak)
    guard = span("execute_guardrail presidio-pii", INTERNAL, 2.5, 6, root, leak)
    router = span("router.get_available_deployment", INTERNAL, 6, 7, root, leak)
    chat = span(
        "chat gpt-4o", CLIENT, 7, 45, root,
        {"gen_ai.operation.name": "chat", **leak, attrs.GEN_AI_INPUT_TOKENS: 30},
    )  # fmt: skip
    write = span("batch_write_to_db", INTERNAL, 45.5, 49, root, leak)
    return {"litellm": [root, auth, guard, router, chat, write]}


def test_litellm_proxy_spans_are_gateway_auth_guardrail_and_inference(tmp_path):
    _, trace, b = _one(tmp_path, "c1" * 16, _litellm())
    assert _us(b.groups) == {
        "gateway": 3_250,  # its own time and the router's 1 ms
        "auth": 1_750,
        "guardrail": 3_500,
        "inference": 38_000,  # the upstream is not traced: the call is the model's time
        "postprocess": 3_500,
    }
    assert _stage_of(trace, "router.get_available_deployment") == "gateway"
    assert _stage_of(trace, "batch_write_to_db") == "postprocess"


def _llmd(nested: bool, true_ttft_ms: float = 33.0) -> dict:
    """llm-d's P/D tree: gateway -> P/D proxy -> prefill, then decode, each to a vLLM;
    the proxy measured ``true_ttft_ms`` to the first token."""
    gw = span("gateway.request", SERVER, 0, 100)
    orch = span("gateway.request_orchestration", INTERNAL, 0.5, 3.5, gw)
    scorer = span("llm_d.epp.scorer.prefix_cache", INTERNAL, 1, 2, orch)
    to_proxy = span("HTTP POST", CLIENT, 4, 99.5, gw)
    proxy = span(
        "llm_d.pd_proxy.POST /v1/chat/completions", SERVER, 4.5, 99, to_proxy,
        {
            attrs.LLMD_PREFILL_MS: 30.0,
            attrs.LLMD_KV_TRANSFER_MS: 1.5,
            attrs.LLMD_DECODE_MS: 62.0,
            attrs.LLMD_TRUE_TTFT_MS: true_ttft_ms,
        },
    )  # fmt: skip
    connector = {"llm_d.pd_proxy.connector": "nixlv2"}
    prefill = span("prefill", INTERNAL, 5, 35, proxy, connector)
    to_p = span("HTTP POST", CLIENT, 5.25, 34.75, prefill)
    vllm_p = span(
        "llm_request", SERVER, 5.5, 34.5, to_p,
        {attrs.GEN_AI_LATENCY_TTFT: 0.028, attrs.GEN_AI_LATENCY_QUEUE: 0.002,
         attrs.GEN_AI_LATENCY_PREFILL: 0.026},
    )  # fmt: skip
    decode = span("decode", INTERNAL, 36.5, 98.5, prefill if nested else proxy, connector)
    to_d = span("HTTP POST", CLIENT, 36.75, 98.25, decode)
    vllm_d = span(
        "llm_request", SERVER, 37, 98, to_d,
        {attrs.GEN_AI_LATENCY_TTFT: 0.004, attrs.GEN_AI_LATENCY_DECODE: 0.057,
         attrs.GEN_AI_PROMPT_TOKENS: 128, "gen_ai.usage.cached_tokens": 64},
    )  # fmt: skip
    return {
        "llm-d-inference-gateway": [gw, orch, scorer, to_proxy],
        "llm-d-pd-proxy": [proxy, prefill, to_p, decode, to_d],
        "vllm-prefill": [vllm_p],
        "vllm-decode": [vllm_d],
    }


def test_llmd_decode_nested_under_prefill_is_taken_as_following_it(tmp_path):
    expected = {
        "gateway": 1_500,
        "gateway.routing": 3_000,
        "network": 2_000,
        "inference": 2_500 + 1_000 + 4_000,  # the proxy's, and each vLLM's own time
        "inference.queue": 2_000,
        "inference.prefill": 500 + 26_000,
        "inference.decode": 500 + 57_000,
    }
    seen = []
    for n, nested in enumerate((True, False)):
        _, trace, b = _one(tmp_path, f"d{n}" * 16, _llmd(nested))
        assert _us(b.groups) == expected
        names = [s.name for s in trace.spans]
        decode, prefill = names.index("decode"), names.index("prefill")
        assert trace.parent[decode] == trace.parent[prefill]  # siblings: decode after
        assert trace.start[decode] >= trace.end[prefill]
        seen.append((b.coordinator_ttft_ns, b.model_ttft_ns, b.cached_tokens))
    # Two times to first token: the proxy's (prefill, KV transfer, decode's first token)
    # and the decode engine's own, which starts from a transferred KV cache.
    assert seen == [(33_000_000, 4_000_000, 64)] * 2
    assert _stage_of(trace, "llm_d.epp.scorer.prefix_cache") == "gateway.routing"


def test_llmd_proxy_phases_come_from_its_duration_attributes(tmp_path):
    tree = _llmd(nested=True)
    proxy = tree["llm-d-pd-proxy"][0]
    _, trace, b = _one(tmp_path, "d9" * 16, {"llm-d-pd-proxy": [proxy]})
    assert _us(b.groups) == {
        "inference.prefill": 30_000,
        "inference.kv_transfer": 1_500,
        "inference.decode": 62_000,
        "inference": 1_000,
    }
    assert b.coordinator_ttft_ns == 33_000_000


def _sglang() -> dict:
    call = span("POST /generate", CLIENT, 0, 82)
    room = span("Bootstrap Room 0x1a2b", INTERNAL, 1, 81, call, {"bootstrap_room": 6699})
    req = span(
        "Decode Req 3f2a9c1d", INTERNAL, 1.5, 80.5, room,
        {"rid": "3f2a9c1d5e", "bootstrap_room": 6699, "cached_tokens": 0},
    )  # fmt: skip
    thread = span(
        "Scheduler [TP 0] (host:abcd1234 | pid:4242)", INTERNAL, 2, 80, req,
        {"thread_label": "Scheduler", "tp_rank": 0, "pid": 4242, "host_id": "abcd1234"},
    )  # fmt: skip
    slices = [
        span("prefill_waiting", INTERNAL, 2, 4, thread),
        span("prefill_forward", INTERNAL, 4, 20, thread),
        span("spec_draft", INTERNAL, 20, 30, thread),
        span("spec_verify", INTERNAL, 30, 36, thread, events=[("spec_accept", 35.9)]),
        span("spec_draft", INTERNAL, 36, 46, thread),
        span("spec_verify", INTERNAL, 46, 52, thread, events=[("spec_accept", 51.9)]),
        span("decode_loop", INTERNAL, 52, 79, thread),
    ]
    return {"client": [call], "sglang": [room, req, thread, *slices]}


def test_sglang_request_thread_and_speculative_slices(tmp_path):
    traces, trace, b = _one(tmp_path, "e1" * 16, _sglang())
    assert _us(b.groups) == {
        "network": 2_000,
        "inference": 3_000,  # the room's, the request's and the thread's own time
        "inference.queue": 2_000,
        "inference.prefill": 16_000,
        "inference.decode.spec_draft": 20_000,
        "inference.decode.spec_verify": 12_000,
        "inference.decode": 27_000,
    }
    assert covers("inference.decode", "inference.decode.spec_verify")
    decode = analyze(traces).columns  # selecting decode takes its speculative slices
    assert len(decode) == 1


def _dynamo() -> dict:
    call = span("POST /v1/chat/completions", CLIENT, 0, 50)
    front = span("http-request", SERVER, 1, 49, call)
    worker = span("handle_payload", INTERNAL, 3, 47, front)
    return {"client": [call], "dynamo-frontend": [front], "dynamo-worker": [worker]}


def test_dynamo_frontend_and_worker(tmp_path):
    _, _, b = _one(tmp_path, "f1" * 16, _dynamo())
    assert _us(b.groups) == {"network": 2_000, "gateway": 4_000, "inference": 44_000}


def _vllm_new() -> dict:
    call = span("POST /v1/chat/completions", CLIENT, 0, 60)
    engine = _vllm(
        "chat llama-3-8b", call,
        {"gen_ai.operation.name": "chat", attrs.GEN_AI_LATENCY_SCHEDULER: 0.0011},
    )  # fmt: skip
    return {"gateway": [call], "vllm": [engine]}


def test_the_batches_give_the_scalar_answer_on_every_convention(tmp_path):
    """Thirty traces of each shape: the batched path takes the repeats, and its JSON is
    the scalar path's (``HOPTRACE_BATCH=off``) byte for byte. The llm-d coordinator's
    own time to first token differs from trace to trace (the batches read it per
    trace)."""
    builders = [_genai, _vllm_new, _litellm, _llmd, _sglang, _dynamo]
    lines = []
    for b, build in enumerate(builders):
        for k in range(30):
            doc = _llmd(True, 30.0 + k / 4) if build is _llmd else build()
            lines.append(orjson.dumps(otlp(f"{b + 1:02x}{k + 1:030x}", doc)))
    path = tmp_path / "conventions.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    scalar, batched, taken = _both(path)
    assert batched == scalar
    # each of the three outputs batches all but the first trace or two of each shape
    assert taken >= 3 * 6 * (30 - 2)
    coordinator = orjson.loads(batched[0])["coordinator_ttft_ms"]
    assert coordinator["n"] == 30
    assert coordinator["min"] == 30.0 and coordinator["max"] == 37.25
