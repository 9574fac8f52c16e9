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
from tracer.analysis.model.substages import covers
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
        attrs.GEN_AI_CACHE_CREATION_TOKENS: 200,
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
    builders = [
        _genai, _vllm_new, _litellm, _llmd, _sglang, _dynamo, _litellm_v2, _llmd_sidecar,
        lambda: _llmd_sidecar(parallel=True),
    ]  # fmt: skip
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
    assert taken >= 3 * len(builders) * (30 - 2)
    coordinator = orjson.loads(batched[0])["coordinator_ttft_ms"]
    assert coordinator["n"] == 60  # the proposal's shape and the sidecar's serial one
    assert coordinator["min"] == 30.0 and coordinator["max"] == 37.25


# -- The sources' shapes of 2026 (docs/conventions.md names each path and commit) -------


def _llmd_sidecar(parallel: bool = False) -> dict:
    """llm-d-router's sidecar (``pkg/sidecar/proxy``): the otelhttp server span
    ``llm_d.pd_proxy.<METHOD> <path>`` (``proxy_helpers.go``), ``forward_request`` a
    SERVER span below it (``chat_completions.go``). Serial (``connector_nixlv2.go``):
    ``prefill`` then ``decode`` started from prefill's context, the summary durations on
    the decode span in whole milliseconds. Parallel dispatch: ``llm_d.pd_proxy.prefill``
    and ``llm_d.pd_proxy.decode``, concurrent siblings."""
    to_proxy = span("HTTP POST", CLIENT, 4, 99.5)
    proxy = span("llm_d.pd_proxy.POST /v1/chat/completions", SERVER, 4.5, 99, to_proxy)
    forward = span(
        "forward_request", SERVER, 4.75, 98.75, proxy,
        {"llm_d.pd_proxy.connector": "nixlv2", "llm_d.pd_proxy.disaggregation_used": True},
    )  # fmt: skip
    names = (
        ("llm_d.pd_proxy.prefill", "llm_d.pd_proxy.decode") if parallel else ("prefill", "decode")
    )
    prefill = span(names[0], INTERNAL, 5, 35, forward)
    to_p = span("HTTP POST", CLIENT, 5.25, 34.75, prefill)
    vllm_p = span(
        "llm_request", SERVER, 5.5, 34.5, to_p,
        {attrs.GEN_AI_LATENCY_TTFT: 0.028, attrs.GEN_AI_LATENCY_QUEUE: 0.002,
         attrs.GEN_AI_LATENCY_PREFILL: 0.026},
    )  # fmt: skip
    if parallel:
        summary = {"llm_d.pd_proxy.parallel_dispatch": True}
        decode = span(names[1], INTERNAL, 5.5, 98.5, forward, summary)
        forward["attributes"].append(
            {"key": "llm_d.pd_proxy.total_duration_ms", "value": {"doubleValue": 94.0}}
        )
    else:
        summary = {
            "llm_d.pd_proxy.total_duration_ms": 94.0,  # whole ms, truncated (Milliseconds())
            "llm_d.pd_proxy.true_ttft_ms": 31.0,  # sidecar entry 4.75 to decode dispatch 36.5
            "llm_d.pd_proxy.prefill_duration_ms": 30.0,
            "llm_d.pd_proxy.decode_duration_ms": 62.0,
            "llm_d.pd_proxy.coordinator_overhead_ms": 1.0,  # 35 to 36.5, truncated
        }
        decode = span(names[1], INTERNAL, 36.5, 98.5, prefill, summary)
    start_d = 5.75 if parallel else 36.75
    to_d = span("HTTP POST", CLIENT, start_d, 98.25, decode)
    vllm_d = span(
        "llm_request", SERVER, start_d + 0.25, 98, to_d,
        {attrs.GEN_AI_LATENCY_TTFT: 0.004, attrs.GEN_AI_LATENCY_DECODE: 98 - start_d - 4.25},
    )  # fmt: skip
    if not parallel:
        vllm_d["attributes"][1]["value"] = {"doubleValue": 0.057}
    return {
        "gateway": [to_proxy],
        "llm-d-pd-proxy": [proxy, forward, prefill, to_p, decode, to_d],
        "vllm-prefill": [vllm_p],
        "vllm-decode": [vllm_d],
    }


def test_llmd_sidecar_summary_on_the_decode_span_keeps_decode_a_phase_after_prefill(tmp_path):
    # The summary durations on decode must not make it an engine request of its own:
    # then decode and its vLLM span would sit outside prefill, off the critical path,
    # and the proxy's time would all be "inference" own time.
    _, trace, b = _one(tmp_path, "a7" * 16, _llmd_sidecar())
    assert _stage_of(trace, "decode") == "inference.decode"
    assert _stage_of(trace, "prefill") == "inference.prefill"
    names = [s.name for s in trace.spans]
    decode, prefill = names.index("decode"), names.index("prefill")
    assert trace.parent[decode] == trace.parent[prefill] == names.index("forward_request")
    assert _us(b.groups) == {
        "network": 1_000 + 500 + 500,  # to the proxy, and each engine's CLIENT span's
        "inference": 500 + 2_000 + 1_000 + 4_000,  # proxy, forward_request, each vLLM
        "inference.queue": 2_000,
        "inference.prefill": 500 + 26_000,  # the prefill span's own, the engine's prefill
        "inference.decode": 500 + 57_000,
    }
    assert b.coordinator_ttft_ns == 31_000_000  # true_ttft_ms, read off the decode span
    assert b.model_ttft_ns == 4_000_000


def test_llmd_parallel_dispatch_keeps_prefill_and_decode_concurrent(tmp_path):
    # Both legs start together: decode is not put after prefill, and prefill, running
    # beside the longer decode, is off the critical path.
    _, trace, b = _one(tmp_path, "a8" * 16, _llmd_sidecar(parallel=True))
    names = [s.name for s in trace.spans]
    decode = names.index("llm_d.pd_proxy.decode")
    prefill = names.index("llm_d.pd_proxy.prefill")
    assert trace.parent[decode] == trace.parent[prefill]
    assert trace.start[decode] < trace.end[prefill]  # concurrent, as recorded
    groups = _us(b.groups)
    assert "inference.prefill" not in groups and "inference.queue" not in groups
    assert groups["inference.decode"] == 500 + 88_000  # the decode span's own, the engine's decode
    assert sum(groups.values()) == 95_500
    assert b.coordinator_ttft_ns is None  # the parallel path writes no true_ttft_ms


def _litellm_v2() -> dict:
    """LiteLLM's OTel v2 tree (``litellm/integrations/otel/model/spans.py``): the
    instrumentor's SERVER span, the ``auth {route}`` phase span
    (``litellm/proxy/auth/user_api_key_auth.py``) with its key lookup (a CLIENT DB call)
    below it, a guardrail, the LLM call, and the spend write, a CLIENT span named
    ``{service} {call_type}``; ``router`` is metrics-only and never a span."""
    root = span("Received Proxy Server Request", SERVER, 0, 50)
    auth = span("auth /v1/chat/completions", INTERNAL, 0.5, 2.25, root)
    lookup = span(
        "postgres.select LiteLLM_VerificationToken", CLIENT, 0.75, 2, auth,
        {"db.system.name": "postgresql"},
    )  # fmt: skip
    guard = span("execute_guardrail presidio-pii", INTERNAL, 2.5, 6, root)
    chat = span(
        "chat gpt-4o", CLIENT, 7, 45, root,
        {"gen_ai.operation.name": "chat", attrs.GEN_AI_INPUT_TOKENS: 30},
    )  # fmt: skip
    write = span(
        "batch_write_to_db insert_spend_logs", CLIENT, 45.5, 49, root,
        {"db.system.name": "postgresql"},
    )  # fmt: skip
    return {"litellm": [root, auth, lookup, guard, chat, write]}


def test_litellm_v2_spend_write_is_postprocess_and_auth_takes_its_lookups(tmp_path):
    _, trace, b = _one(tmp_path, "c7" * 16, _litellm_v2())
    assert _us(b.groups) == {
        "gateway": 3_250,  # the server span's own time
        "auth": 1_750,  # with the key lookup below it
        "guardrail": 3_500,
        "inference": 38_000,
        "postprocess": 3_500,
    }
    assert _stage_of(trace, "batch_write_to_db insert_spend_logs") == "postprocess"
    assert _stage_of(trace, "postgres.select LiteLLM_VerificationToken") == "auth"


def test_genai_cache_creation_tokens_are_not_cached_prompt_tokens(tmp_path):
    """``gen_ai.usage.cache_read.input_tokens`` (part of ``input_tokens``) are the cached
    prompt tokens; ``cache_creation.input_tokens`` beside it were written, not read."""
    call = span(
        "chat claude", CLIENT, 0, 10, None,
        {"gen_ai.operation.name": "chat", attrs.GEN_AI_INPUT_TOKENS: 5120,
         attrs.GEN_AI_CACHE_READ_TOKENS: 4500, attrs.GEN_AI_CACHE_CREATION_TOKENS: 500},
    )  # fmt: skip
    _, _, b = _one(tmp_path, "c8" * 16, {"agent": [call]})
    assert (b.input_tokens, b.cached_tokens) == (5120, 4500)


def test_sglang_req_span_cached_tokens_are_read(tmp_path):
    call = span("POST /generate", CLIENT, 0, 20)
    req = span(
        "Req 3f2a9c1d", INTERNAL, 1, 19, call,
        {"rid": "3f2a9c1d5e", attrs.GEN_AI_PROMPT_TOKENS: 256, attrs.GEN_AI_CACHED_TOKENS: 192},
    )  # fmt: skip
    _, trace, b = _one(tmp_path, "e7" * 16, {"client": [call], "sglang": [req]})
    assert _stage_of(trace, "Req 3f2a9c1d") == "inference"
    assert (b.input_tokens, b.cached_tokens) == (256, 192)
