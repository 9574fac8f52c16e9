"""Serving engines' request spans as each engine emits them, through the OTLP JSON decoder.

docs/analysis.md sections 2 (conventions, sub-stages), 3 (critical path), 4 (TTFT) and
6 (what-if); span shapes from each engine's source (vLLM 0.33, SGLang 0.5.23, TGI 3.3,
Triton 2.73, OpenLLMetry, OpenInference). Every trace: a "client" CLIENT span calling the
engine, whose request span is a remote child. Times below are ms from T0.
"""

from __future__ import annotations

import itertools

import orjson
import pytest

from tracer.analysis import analyze, load, what_if
from tracer.analysis.conventions.stage_map import parse_stage_map

MS = 1_000_000
T0 = 1_760_000_000_000_000_000
INTERNAL, SERVER, CLIENT = 1, 2, 3
_ids = itertools.count(1)


def _value(v: object) -> dict:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": v}


def _ns(ms: float) -> str:
    return str(T0 + round(ms * MS))


def span(name, kind, start_ms, end_ms, parent=None, attributes=None, events=()):
    """One OTLP JSON span (trace id filled in by :func:`otlp`); events are (name, at_ms)."""
    raw = {
        "spanId": f"{next(_ids):016x}",
        "name": name,
        "kind": kind,
        "startTimeUnixNano": _ns(start_ms),
        "endTimeUnixNano": _ns(end_ms),
        "attributes": [{"key": k, "value": _value(v)} for k, v in (attributes or {}).items()],
        "events": [{"timeUnixNano": _ns(at), "name": n, "attributes": []} for n, at in events],
        "status": {},
    }
    if parent is not None:
        raw["parentSpanId"] = parent["spanId"]
    return raw


def otlp(trace_id: str, by_service: dict[str, list[dict]]) -> dict:
    """An ``{"resourceSpans": [...]}`` object, one resource per service."""
    resource_spans = []
    for service, spans in by_service.items():
        for s in spans:
            s["traceId"] = trace_id
        resource_spans.append(
            {
                "resource": {"attributes": [{"key": "service.name", "value": _value(service)}]},
                "scopeSpans": [{"scope": {"name": service}, "spans": spans}],
            }
        )
    return {"resourceSpans": resource_spans}


def load_docs(tmp_path, *docs):
    """Write the objects as OTLP JSON lines and load them through the real loader."""
    path = tmp_path / "traces.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(d) for d in docs) + b"\n")
    return load([path])


def groups_ms(result) -> dict[str, float]:
    return {g.name: g.mean_ms for g in result.groups}


def ttft_groups_ms(result) -> dict[str, float]:
    (b,) = result.breakdowns
    return {k: v / MS for k, v in (b.ttft_groups or {}).items()}


def client(name="POST /v1/chat/completions", kind=CLIENT, attributes=None, events=()):
    """The caller's span: [0, 1000] ms."""
    return span(name, kind, 0, 1000, attributes=attributes, events=events)


# vLLM llm_request [50, 950], arrival at 50: FT = 50 + 200 = 250;
# prefill [250 - 100, 250] = [150, 250], queue [150 - 30, 150] = [120, 150],
# decode [250, 250 + 600] = [250, 850]; inference = (120 - 50) + (950 - 850) = 170;
# network = (50 - 0) + (1000 - 950) = 100.
VLLM_LATENCY = {
    "gen_ai.latency.time_to_first_token": 0.2,
    "gen_ai.latency.time_in_queue": 0.03,
    "gen_ai.latency.time_in_model_prefill": 0.1,
    "gen_ai.latency.time_in_model_decode": 0.6,
    "gen_ai.latency.time_in_model_inference": 0.7,
    "gen_ai.latency.e2e": 0.9,
}


def vllm_doc(trace_id="a1" * 16, latency=VLLM_LATENCY, phase_spans=()):
    """Client (first chunk at 0 + 300 ms) -> vLLM ``llm_request`` [50, 950] (+ phase spans)."""
    root = client(attributes={"gen_ai.response.time_to_first_chunk": 0.3})
    usage = {"gen_ai.usage.prompt_tokens": 812, "gen_ai.usage.completion_tokens": 64}
    request = {"gen_ai.request.id": "chatcmpl-3c2d9a", "gen_ai.request.max_tokens": 64}
    engine = span("llm_request", SERVER, 50, 950, root, {**request, **usage, **latency})
    phases = [span(name, INTERNAL, lo, hi, engine) for name, lo, hi in phase_spans]
    return otlp(trace_id, {"client": [root], "vllm": [engine, *phases]})


def test_vllm_attributes_split_inference_into_queue_prefill_decode(tmp_path):
    """vLLM's gen_ai.latency.* seconds become queue, prefill and decode intervals."""
    result = analyze(load_docs(tmp_path, vllm_doc()))
    assert result.e2e.p50 == pytest.approx(1000.0, abs=1e-3)
    assert groups_ms(result) == pytest.approx(
        {
            "network": 100.0,
            "inference": 170.0,
            "inference.queue": 30.0,
            "inference.prefill": 100.0,
            "inference.decode": 600.0,
        },
        abs=1e-3,
    )
    assert {(h.source, h.target): h.mean_ms for h in result.hops} == pytest.approx(
        {("client", "vllm"): 100.0}, abs=1e-3
    )


def test_vllm_ttft_client_and_model_are_kept_apart(tmp_path):
    """Client TTFT comes from the client's first-chunk mark, model TTFT from vLLM's TTFT."""
    result = analyze(load_docs(tmp_path, vllm_doc()))
    assert result.ttft is not None and result.model_ttft is not None
    assert result.ttft.p50 == pytest.approx(300.0, abs=1e-3)  # 0 + 0.3 s
    assert result.model_ttft.p50 == pytest.approx(200.0, abs=1e-3)  # 250 - 50
    # TTFT view over [0, 300]: llm_request ends at its mark 250, decode starts there.
    assert ttft_groups_ms(result) == pytest.approx(
        {
            "network": 100.0,  # (50 - 0) + (300 - 250)
            "inference": 70.0,  # 120 - 50
            "inference.queue": 30.0,
            "inference.prefill": 100.0,
        },
        abs=1e-3,
    )


def test_vllm_tokens_read_from_prompt_and_completion_keys(tmp_path):
    """vLLM's gen_ai.usage.prompt_tokens / completion_tokens are the trace's tokens."""
    tokens = analyze(load_docs(tmp_path, vllm_doc())).tokens
    assert tokens is not None
    assert (tokens.requests, tokens.input_total, tokens.output_total) == (1, 812, 64)


def test_vllm_phase_spans_win_over_latency_attributes(tmp_path):
    """vllm.request.* child spans name the phases; the (different) attributes are unused."""
    doc = vllm_doc(
        phase_spans=[
            ("vllm.request.queue", 100, 140),
            ("vllm.request.prefill", 140, 300),
            ("vllm.request.decode", 300, 900),
        ]
    )
    result = analyze(load_docs(tmp_path, doc))
    assert groups_ms(result) == pytest.approx(
        {
            "network": 100.0,
            "inference": 100.0,  # (100 - 50) + (950 - 900); the attributes would give 170
            "inference.queue": 40.0,  # 140 - 100, not 30
            "inference.prefill": 160.0,  # 300 - 140, not 100
            "inference.decode": 600.0,  # 900 - 300
        },
        abs=1e-3,
    )


# SGLang root " Req 3f9c1a2b" [40, 960]: FT = 40 + 220 = 260. time_in_model_prefill
# counts from api_server_dispatch's end (45): 260 - 45 = 215 ms, queueing included.
SGLANG_ROOT = {
    "rid": "3f9c1a2b7d0e4c5f",
    "module": "sglang::request",
    "gen_ai.response.model": "llama-3-8b",
    "gen_ai.usage.prompt_tokens": 812,
    "gen_ai.usage.completion_tokens": 64,
    "gen_ai.latency.time_to_first_token": 0.22,
    "gen_ai.latency.time_in_model_prefill": 0.215,
    "gen_ai.latency.time_in_model_decode": 0.7,
    "gen_ai.latency.time_in_model_inference": 0.915,
    "gen_ai.latency.e2e": 0.92,
}


def sglang_doc(trace_id, slices: bool):
    root = client()
    req = span(" Req 3f9c1a2b", INTERNAL, 40, 960, root, SGLANG_ROOT)
    spans = [req]
    if slices:
        tok = span("Tokenizer(host:9a8b7c6d | pid:4242)", INTERNAL, 40, 45, req, {"pid": 4242})
        sched = span("Scheduler [TP 0]  [PP 0] (host:9a8b7c6d | pid:4310)", INTERNAL, 46, 950, req)
        fwd = span("decode_forward", INTERNAL, 260, 950, sched)
        spans += [
            tok,
            span("tokenize", INTERNAL, 40, 44, tok),
            span("api_server_dispatch", INTERNAL, 44, 45, tok),
            sched,
            span("request_process", INTERNAL, 46, 50, sched),
            span("prefill_waiting", INTERNAL, 50, 110, sched),
            span("prefill_forward", INTERNAL, 110, 250, sched),
            span("decode_waiting", INTERNAL, 250, 260, sched),
            fwd,
            span("decode_loop", INTERNAL, 260, 400, fwd, {"decode_ct": 0}),
            span("decode_loop", INTERNAL, 400, 900, fwd, {"decode_ct": 1}),
        ]
    return otlp(trace_id, {"client": [root], "sglang": spans})


def test_sglang_slices_map_to_queue_prefill_decode(tmp_path):
    """SGLang's prefill_waiting / prefill_forward / decode_* slices are the sub-stages."""
    result = analyze(load_docs(tmp_path, sglang_doc("b2" * 16, slices=True)))
    assert groups_ms(result) == pytest.approx(
        {
            "network": 80.0,  # (40 - 0) + (1000 - 960)
            # Req (960 - 950) + (46 - 45) + tokenize 4 + api_server_dispatch 1
            # + request_process 4 = 20
            "inference": 20.0,
            "inference.queue": 60.0,  # prefill_waiting 110 - 50
            "inference.prefill": 140.0,  # prefill_forward 250 - 110
            # decode_waiting 10 + decode_forward own (950 - 900) + loops 140 + 500
            "inference.decode": 700.0,
        },
        abs=1e-3,
    )
    assert result.model_ttft is not None
    assert result.model_ttft.p50 == pytest.approx(220.0, abs=1e-3)


def test_sglang_root_alone_prefill_interval_includes_queueing(tmp_path):
    """Without slices the prefill is [FT - prefill, FT], queueing included; no queue group."""
    result = analyze(load_docs(tmp_path, sglang_doc("b3" * 16, slices=False)))
    assert groups_ms(result) == pytest.approx(
        {
            "network": 80.0,
            "inference": 5.0,  # 45 - 40, before [260 - 215, 260] = [45, 260]
            "inference.prefill": 215.0,
            "inference.decode": 700.0,  # [260, 260 + 700] = [260, 960]
        },
        abs=1e-3,
    )


# TGI handler chat_completions [20, 980]; Rust Duration Debug strings.
def tgi_doc(trace_id, children: bool, queue_time: str):
    root = client()
    fields = {"total_time": "959.9ms", "validation_time": "2.5ms", "queue_time": queue_time}
    fields |= {"inference_time": "950ms", "seed": "None", "code.lineno": 1168}
    handler = span("chat_completions", INTERNAL, 20, 980, root, fields, [("Success", 979.5)])
    spans = [handler]
    if children:
        gen = span("generate", INTERNAL, 21, 979, handler)
        stream = span("generate_stream", INTERNAL, 21, 978, gen)
        sched = span("schedule", INTERNAL, 24, 978, stream)
        spans += [
            gen,
            stream,
            span("validate", INTERNAL, 21, 23.5, stream),
            sched,
            span("queued", INTERNAL, 24, 28, sched),
            span("infer", INTERNAL, 28, 500, sched),
            span("infer", INTERNAL, 500, 975, sched),
        ]
    return otlp(trace_id, {"client": [root], "tgi": spans})


def test_tgi_queued_span_maps_to_queue(tmp_path):
    """TGI's queued span (under schedule) is inference.queue; queue_time is not used."""
    result = analyze(load_docs(tmp_path, tgi_doc("c4" * 16, True, "3.9ms")))
    assert groups_ms(result) == pytest.approx(
        {
            "network": 40.0,  # (20 - 0) + (1000 - 980)
            "inference.queue": 4.0,  # queued 28 - 24, not 3.9
            "inference": 956.0,  # 980 - 20 - 4
        },
        abs=1e-3,
    )


def test_tgi_duration_strings_give_queue_without_child_spans(tmp_path):
    """Without child spans the queue is [start + validation_time, + queue_time] (µs parsed)."""
    result = analyze(load_docs(tmp_path, tgi_doc("c5" * 16, False, "750\u00b5s")))
    assert groups_ms(result) == pytest.approx(
        {
            "network": 40.0,
            "inference.queue": 0.75,  # [20 + 2.5, 22.5 + 0.75] = [22.5, 23.25]
            "inference": 959.25,  # 960 - 0.75
        },
        abs=1e-3,
    )


def test_triton_queue_is_queue_start_to_compute_start(tmp_path):
    """Triton's model span QUEUE_START event to its compute span's start is the queue."""
    root = client()
    http = [("HTTP_RECV_START", 9), ("HTTP_RECV_END", 9.5), ("HTTP_SEND_START", 986)]
    infer = span("InferRequest", SERVER, 10, 990, root, events=http)
    model_attrs = {"triton.model_name": "llama3", "triton.model_version": 1}
    phases = [("REQUEST_START", 12), ("QUEUE_START", 13), ("REQUEST_END", 985)]
    model = span("llama3", SERVER, 12, 985, infer, model_attrs, phases)
    steps = ["COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END"]
    compute = span(
        "compute", SERVER, 40, 980, model, events=list(zip(steps, (40, 45, 975, 980), strict=True))
    )
    doc = otlp("d6" * 16, {"client": [root], "triton-inference-server": [infer, model, compute]})
    result = analyze(load_docs(tmp_path, doc))
    assert groups_ms(result) == pytest.approx(
        {
            "network": 20.0,  # (10 - 0) + (1000 - 990)
            # InferRequest inherits nothing past the network span: (12 - 10) + (990 - 985)
            "other": 7.0,
            "inference.queue": 27.0,  # COMPUTE_START 40 - QUEUE_START 13
            "inference": 946.0,  # llama3 (13 - 12) + (985 - 980) + compute 980 - 40
        },
        abs=1e-3,
    )


OPENLLMETRY = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai"}
OPENLLMETRY_LEGACY = {"llm.request.type": "chat", "gen_ai.system": "openai"}
OPENINFERENCE = {"openinference.span.kind": "LLM", "llm.system": "openai"}


@pytest.mark.parametrize(
    ("name", "kind", "attributes", "events", "ttft"),
    [
        ("openai.chat", CLIENT, OPENLLMETRY,
         [("gen_ai.content.completion.chunk", at) for at in (320, 340, 360, 990)], 320.0),
        ("openai.chat", CLIENT, OPENLLMETRY_LEGACY,
         [("llm.content.completion.chunk", at) for at in (330, 350, 990)], 330.0),
        ("ChatCompletion", INTERNAL, OPENINFERENCE, [("First Token Stream Event", 314)], 314.0),
    ],
    ids=["openllmetry", "openllmetry-legacy", "openinference"],
)  # fmt: skip
def test_ttft_from_first_chunk_event_on_client_span(tmp_path, name, kind, attributes, events, ttft):
    """The client TTFT is the first chunk event's time minus the root's start (0)."""
    root = client(name, kind, attributes, events)
    # The engine's own mark (50 + 200 = 250) is earlier but not in the root's service.
    engine = span("llm_request", SERVER, 50, 950, root, {"gen_ai.latency.time_to_first_token": 0.2})
    result = analyze(load_docs(tmp_path, otlp("e7" * 16, {"client": [root], "vllm": [engine]})))
    assert result.ttft is not None
    assert result.ttft.p50 == pytest.approx(ttft, abs=1e-3)
    assert sum(ttft_groups_ms(result).values()) == pytest.approx(ttft, abs=1e-3)


@pytest.mark.parametrize(
    ("stage", "after"),
    [
        ("inference.decode", 1000 - 600 * (1 - 1 / 10)),  # 460
        ("inference.prefill", 1000 - 100 * (1 - 1 / 10)),  # 910
        ("inference.queue", 1000 - 30 * (1 - 1 / 10)),  # 973
    ],
)
def test_whatif_substage_is_amdahl_on_the_chain(tmp_path, stage, after):
    """Speeding up one engine sub-stage k-fold removes a_X * (1 - 1/k) from e."""
    projection = what_if(load_docs(tmp_path, vllm_doc()), stage, 10)
    assert projection.before.p50 == pytest.approx(1000.0, abs=1e-3)
    assert projection.after.p50 == pytest.approx(after, abs=1e-3)


def test_whatif_inference_covers_its_substages(tmp_path):
    """`inference` means inference and all its sub-stages: 170 + 30 + 100 + 600 = 900 ms."""
    projection = what_if(load_docs(tmp_path, vllm_doc()), "inference", 10)
    assert projection.after.p50 == pytest.approx(1000 - 900 * (1 - 1 / 10), abs=1e-3)  # 190
    assert projection.stage_share == pytest.approx(0.9, abs=1e-9)


def test_user_stage_map_wins_over_engine_convention(tmp_path):
    """A --stage-map rule for llm_request makes it stage "model" with no sub-stages."""
    rules = parse_stage_map({"rule": [{"operation": "llm_request", "stage": "model"}]}, "test")
    result = analyze(load_docs(tmp_path, vllm_doc()), stage_map=rules)
    assert groups_ms(result) == pytest.approx({"network": 100.0, "model": 900.0}, abs=1e-3)


def test_ttft_view_uses_skew_corrected_engine_mark(tmp_path):
    """A skewed engine span (clock 1000 ms ahead) gives the same TTFT split as unskewed."""
    doc = vllm_doc()
    (engine,) = [
        s
        for rs in doc["resourceSpans"]
        for s in rs["scopeSpans"][0]["spans"]
        if s["name"] == "llm_request"
    ]
    engine["startTimeUnixNano"], engine["endTimeUnixNano"] = _ns(1050), _ns(1950)
    result = analyze(load_docs(tmp_path, doc))
    assert result.warnings.skew_adjusted == 1  # centred back to [50, 950]
    assert groups_ms(result)["inference.decode"] == pytest.approx(600.0, abs=1e-3)
    # As unskewed: the engine's mark 1250 - 1000 = 250 ends it in the TTFT view.
    assert ttft_groups_ms(result) == pytest.approx(
        {"network": 100.0, "inference": 70.0, "inference.queue": 30.0, "inference.prefill": 100.0},
        abs=1e-3,
    )
