"""The batches and the scalar path (``HOPTRACE_BATCH=off``) give the same JSON, whatever
a span carries: random traces of a chain with a serving engine, written as a
Collector's file exporter writes them (one line per service, a trace's parts on
several lines), where every field of a span varies from trace to trace: status,
kind, events (first-token and phase events), links, attributes (stage rules, engine
latencies, token counts, model names, a sampler's attributes, values of every type),
the trace state (a sampler's threshold, other vendors' entries) and the resource.

The key of a batch is derived from what the scalar path's decisions read
(``tracer/analysis/attribution/shapes.py``); this test is the proof that nothing a
decision reads escapes it."""

from __future__ import annotations

import importlib
import os
from contextlib import contextmanager
from pathlib import Path

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracer._errors import HoptraceError
from tracer.analysis import analyze_sources, load, what_if
from tracer.analysis.attribution import attribute as attribute_module
from tracer.analysis.attribution.shapes import FIELDS
from tracer.analysis.model.prepare import prepare
from tracer.analysis.query import Query
from tracer.analysis.render.json_out import analysis_dict, dumps, whatif_dict
from tracer.sdk.json_export import _value as otlp_value  # the exporter's own encoding
from tracer.spans.model import Span, Warnings

T0 = 1_760_000_000_000_000_000
MS = 1_000_000

#: (service, name, kind, parent, attributes): a client, a gateway with auth, an app
#: calling a model through an LLM span, and a vLLM-like engine request span.
_CHAIN = [
    ("client", "chat", 1, -1, {"hoptrace.stage": "client"}),
    ("client", "POST", 3, 0, {}),
    ("gateway", "POST /v1/chat", 2, 1, {"hoptrace.stage": "gateway"}),
    ("gateway", "verify key", 1, 2, {"hoptrace.stage": "auth"}),
    ("gateway", "POST", 3, 2, {}),
    ("app", "POST /generate", 2, 4, {}),
    ("app", "build context", 1, 5, {"hoptrace.stage": "context"}),
    ("app", "chat llama", 1, 5, {"gen_ai.operation.name": "chat"}),
    ("app", "POST", 3, 7, {}),
    (
        "vllm",
        "llm_request",
        2,
        8,
        {
            "gen_ai.request.model": "llama",
            "gen_ai.usage.prompt_tokens": 40,
            "gen_ai.usage.completion_tokens": 12,
            "gen_ai.latency.time_to_first_token": 0.03,
            "gen_ai.latency.time_in_queue": 0.004,
            "gen_ai.latency.time_in_model_prefill": 0.02,
            "gen_ai.latency.time_in_model_decode": 0.05,
        },
    ),
    ("app", "postprocess", 1, 5, {"hoptrace.stage": "postprocess"}),
]
_KEYS = [
    "gen_ai.operation.name",
    "gen_ai.system",
    "openinference.span.kind",
    "hoptrace.stage",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.latency.time_in_queue",
    "gen_ai.latency.time_in_model_prefill",
    "gen_ai.latency.time_in_model_decode",
    "gen_ai.latency.time_to_first_token",
    "gen_ai.response.time_to_first_chunk",
    "http.route",
    "error.type",
    "db.system",
    "rpc.system",
    "messaging.system",
    "sampling.probability",
    "SampleRate",
    "hoptrace.run",  # a --split-by value (below), on any span
]
#: W3C trace states: OpenTelemetry's sampling thresholds (1/16 and 1/4 kept), a
#: threshold that is not one, another vendor's entry.
_TRACE_STATES = ["ot=th:f", "ot=th:c", "ot=th:zz", "vendor=x", "ot=th:c,vendor=x"]
_VALUES = st.one_of(
    st.sampled_from(["chat", "LLM", "CHAIN", "auth", "inference", "openai", "llama", "x"]),
    st.integers(-5, 5000),
    st.floats(-1.0, 2.0, allow_nan=False),
    st.booleans(),
    st.lists(st.sampled_from(["a", "b"]), max_size=2),
)
_EVENTS = st.sampled_from(
    [
        "hoptrace.first_token",
        "gen_ai.content.completion.chunk",
        "First Token Stream Event",
        "QUEUE_START",
        "COMPUTE_START",
        "exception",
        "log",
    ]
)
#: One change to one span of a trace: (span, what, value).
_CHANGE = st.one_of(
    st.tuples(st.integers(0, len(_CHAIN) - 1), st.just("status"), st.sampled_from([0, 1, 2])),
    st.tuples(st.integers(0, len(_CHAIN) - 1), st.just("kind"), st.integers(1, 5)),
    st.tuples(
        st.integers(0, len(_CHAIN) - 1),
        st.just("event"),
        st.tuples(_EVENTS, st.floats(0.0, 1.2)),
    ),
    st.tuples(st.integers(0, len(_CHAIN) - 1), st.just("link"), st.integers(0, 3)),
    st.tuples(
        st.integers(0, len(_CHAIN) - 1),
        st.just("attribute"),
        st.tuples(st.sampled_from(_KEYS), _VALUES),
    ),
    st.tuples(
        st.integers(0, len(_CHAIN) - 1),
        st.just("drop"),
        st.sampled_from(sorted({k for *_, a in _CHAIN for k in a})),
    ),
    st.tuples(
        st.integers(0, len(_CHAIN) - 1), st.just("trace state"), st.sampled_from(_TRACE_STATES)
    ),
    st.tuples(st.just(-1), st.just("sampled"), st.sampled_from(_TRACE_STATES[:2])),
    st.tuples(
        st.integers(0, len(_CHAIN) - 1),
        st.just("resource"),
        st.sampled_from(["service.version", "service.name", "host.name"]),
    ),
)
#: A trace: its changes, and its times (how far each span runs inside its parent).
_TRACE = st.tuples(
    st.lists(_CHANGE, max_size=2),
    st.lists(st.floats(0.05, 1.0), min_size=len(_CHAIN), max_size=len(_CHAIN)),
)


def _attributes(a: dict) -> list[dict]:
    return [{"key": k, "value": otlp_value(v)} for k, v in a.items()]


def _otlp(number: int, changes: list, fractions: list[float]) -> dict[str, list[tuple[dict, dict]]]:
    """The trace's spans as OTLP JSON, by (service, resource): (resource attributes,
    span) pairs."""
    tid = f"{number + 1:032x}"
    start, end = [0] * len(_CHAIN), [0] * len(_CHAIN)
    spans = []
    for i, (service, name, kind, parent, attributes) in enumerate(_CHAIN):
        if parent < 0:
            start[i], end[i] = T0 + number * 10_000 * MS, T0 + number * 10_000 * MS + 2_000 * MS
        else:
            room = end[parent] - start[parent]
            start[i] = start[parent] + room // 20
            end[i] = start[i] + int((room - room // 10) * fractions[i])
        spans.append(
            {
                "service": service,
                "resource": {"service.name": service},
                "span": {
                    "traceId": tid,
                    "spanId": f"{i + 1:016x}",
                    "parentSpanId": "" if parent < 0 else f"{parent + 1:016x}",
                    "name": name,
                    "kind": kind,
                    "startTimeUnixNano": str(start[i]),
                    "endTimeUnixNano": str(end[i]),
                    "attributes": dict(attributes),
                    "events": [],
                    "links": [],
                    "status": {},
                },
            }
        )
    for i, what, value in changes:
        span = spans[i]["span"]
        if what == "status":
            span["status"] = {"code": value}
        elif what == "kind":
            span["kind"] = value
        elif what == "event":
            name, at = value
            t = start[i] + int((end[i] - start[i]) * at)
            span["events"].append({"name": name, "timeUnixNano": str(t)})
        elif what == "link":
            span["links"].append({"traceId": f"{value + 99:032x}", "spanId": f"{value + 1:016x}"})
        elif what == "attribute":
            span["attributes"][value[0]] = value[1]
        elif what == "drop":
            span["attributes"].pop(value, None)
        elif what == "trace state":
            span["traceState"] = value
        elif what == "sampled":  # every span of the trace, as a sampler records them
            for s in spans:
                s["span"]["traceState"] = value
        else:
            service = spans[i]["service"]
            spans[i]["resource"][value] = service + "-2" if value == "service.name" else "v2"
    by: dict[str, list[tuple[dict, dict]]] = {}
    for s in spans:
        s["span"]["attributes"] = _attributes(s["span"]["attributes"])
        resource = s["resource"]
        by.setdefault(orjson.dumps(resource).decode(), []).append((resource, s["span"]))
    return by


def _write(path: Path, traces: list) -> Path:
    """Lines as a Collector's file exporter writes them: each service's spans of a few
    traces together, and a trace's services on different lines."""
    lines: list[bytes] = []
    pending: dict[str, list[tuple[dict, dict]]] = {}
    for number, (changes, fractions) in enumerate(traces):
        for key, pairs in _otlp(number, changes, fractions).items():
            pending.setdefault(key, []).extend(pairs)
        if number % 3 == 2 or number == len(traces) - 1:
            for pairs in pending.values():
                resource = pairs[0][0]
                lines.append(
                    orjson.dumps(
                        {
                            "resourceSpans": [
                                {
                                    "resource": {"attributes": _attributes(resource)},
                                    "scopeSpans": [{"spans": [span for _, span in pairs]}],
                                }
                            ]
                        }
                    )
                )
            pending = {}
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@contextmanager
def _batch(mode: str):
    old = os.environ.get("HOPTRACE_BATCH")
    os.environ["HOPTRACE_BATCH"] = mode
    try:
        yield
    finally:
        if old is None:
            del os.environ["HOPTRACE_BATCH"]
        else:
            os.environ["HOPTRACE_BATCH"] = old


def _outputs(path: Path) -> list[str]:
    out = []
    for group_by in ("stage", "service"):
        analysis, _ = analyze_sources([str(path)], Query(group_by=group_by, workers=1))
        out.append(dumps(analysis_dict(analysis)))
    # Each trace's --split-by value: from the earliest span that carries the attribute.
    split, _ = analyze_sources([str(path)], Query(split_by="hoptrace.run", workers=1))
    cols = split.columns
    values = [None if i < 0 else cols.strings[i] for i in cols.split.tolist()]
    out.append(
        dumps(analysis_dict(split)) + repr(list(zip(cols.ids.tolist(), values, strict=True)))
    )
    traces = load([str(path)])
    try:
        out.append(dumps(whatif_dict(what_if(traces, stage="inference", speedup=4.0))))
    except HoptraceError as exc:  # no trace has the stage: both paths say so alike
        out.append(f"{type(exc).__name__}: {exc}")
    return out


def _both(path: Path) -> tuple[list[str], list[str], int]:
    """(scalar, batched) outputs of ``path`` and how many traces the batches took."""
    taken: list[bool] = []
    offer = attribute_module.ShapeBatcher.offer

    def counting(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        took = offer(self, *args, **kwargs)
        taken.append(took)
        return took

    with _batch("off"):
        scalar = _outputs(path)
    attribute_module.ShapeBatcher.offer = counting  # type: ignore[method-assign]
    try:
        with _batch("on"):
            batched = _outputs(path)
    finally:
        attribute_module.ShapeBatcher.offer = offer  # type: ignore[method-assign]
    return scalar, batched, sum(taken)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    base=st.lists(_CHANGE, max_size=2),
    traces=st.lists(_TRACE, min_size=8, max_size=30),
)
def test_batched_and_scalar_json_agree_whatever_each_span_carries(tmp_path, base, traces):
    # Every trace takes the base changes (so that shapes repeat and the batches take
    # traces) and its own.
    traces = [(base + changes, fractions) for changes, fractions in traces]
    scalar, batched, _ = _both(_write(tmp_path / "spans.jsonl", traces))
    assert batched == scalar


def test_both_paths_give_one_error_when_no_trace_has_the_stage(tmp_path):
    """Every trace's inference span relabelled (Hypothesis found it): the projection has
    no stage to speed up, and both paths say so in the same line."""
    relabelled = [(0, "status", 0), (9, "attribute", ("hoptrace.stage", "chat"))]
    traces = [(relabelled, [1.0] * len(_CHAIN)) for _ in range(8)]
    scalar, batched, taken = _both(_write(tmp_path / "spans.jsonl", traces))
    assert scalar[-1].startswith("ConfigError: ") and "inference" in scalar[-1]
    assert taken > 0
    assert batched == scalar


def test_the_batches_take_the_engine_chain_and_agree(tmp_path):
    """The comparison above runs the batches, not the scalar path twice: traces of the
    chain with its engine span (phases, marks, tokens) are taken, errors and events
    among them."""
    traces = [
        (
            [(3, "status", 2)] if i % 4 == 0 else [(9, "event", ("hoptrace.first_token", 0.3))],
            [0.2 + 0.7 * ((i * 37 + k * 11) % 10) / 10 for k in range(len(_CHAIN))],
        )
        for i in range(40)
    ]
    scalar, batched, taken = _both(_write(tmp_path / "spans.jsonl", traces))
    assert batched == scalar
    # two shapes (an error at auth, a first-token event at the engine), each learned
    # once per output: the rest of the 40 traces are batched in each of the three
    assert taken >= 3 * (40 - 2 * 2)


def test_every_field_of_a_span_is_classified_for_the_batches():
    """A new field of a span must say how the batches treat it (in the key, read per
    trace, ...): else a decision that read it could make the batches drift."""
    assert set(Span.__struct_fields__) == set(FIELDS)


def test_sampled_traces_are_batched_with_their_weights(tmp_path):
    """Traces a sampler kept one in four of (OpenTelemetry's threshold ``th:c`` on every
    span) are taken by the batches, each row with its weight: the estimate is four
    traces for every one kept, as on the scalar path; a trace whose spans disagree on
    the threshold has an unknown weight on both paths."""
    traces = [
        (
            [(-1, "sampled", "ot=th:c")] + ([(4, "trace state", "ot=th:f")] if i == 7 else []),
            [0.2 + 0.7 * ((i * 37 + k * 11) % 10) / 10 for k in range(len(_CHAIN))],
        )
        for i in range(40)
    ]
    scalar, batched, taken = _both(_write(tmp_path / "spans.jsonl", traces))
    assert batched == scalar
    # one shape, learned from its first traces in each of the three outputs; the rest
    # are batched, the trace whose spans disagree among them
    assert taken >= 3 * (40 - 4)
    sample = orjson.loads(batched[0])["sample"]
    assert sample["kept_traces"] == 40
    assert sample["estimated_traces"] == 39 * 4 + 1
    assert sample["unknown_weight_traces"] == 1


def test_a_decision_that_reads_the_trace_state_leaves_its_shape_to_the_scalar_path(
    tmp_path, monkeypatch
):
    """The batches read the trace state only for the weight. Were a stage rule to read
    it (here: a root whose trace state names a vendor is an error), the shape would be
    learned as one the batches cannot take, and the answers would still agree."""
    prepare_module = importlib.import_module("tracer.analysis.model.prepare")
    resolve = prepare_module._resolve_stages

    def reading(spans, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        stage, *rest = resolve(spans, *args, **kwargs)
        stage = [
            "error" if (s.trace_state or "").startswith("vendor") else st
            for s, st in zip(spans, stage, strict=False)
        ] + stage[len(spans) :]
        return (stage, *rest)

    monkeypatch.setattr(prepare_module, "_resolve_stages", reading)
    traces = [
        (
            [(0, "trace state", "vendor=x" if i % 2 else "ot=th:c")],
            [0.2 + 0.7 * ((i * 37 + k * 11) % 10) / 10 for k in range(len(_CHAIN))],
        )
        for i in range(20)
    ]
    scalar, batched, taken = _both(_write(tmp_path / "spans.jsonl", traces))
    assert batched == scalar
    assert taken == 0
    assert "error" in {g["name"] for g in orjson.loads(batched[0])["groups"]}


def test_a_split_value_is_the_earliest_carriers_on_both_paths(tmp_path):
    # Two spans of the shape carry the --split-by attribute: the earlier one's value
    # counts (auth starts before build context), on the batches as on the scalar path;
    # some traces carry neither.
    carriers = [(6, "attribute", ("hoptrace.run", "late")), (3, "attribute", ("hoptrace.run", 7))]
    traces = [(carriers if i % 4 else [], [0.2 + 0.03 * (i % 20)] * len(_CHAIN)) for i in range(40)]
    path = _write(tmp_path / "spans.jsonl", traces)
    scalar, batched, taken = _both(path)
    assert batched == scalar
    assert taken >= 30
    assert "('" + f"{2:032x}', '7')" in batched[2]  # trace 2 (i = 1): the value at auth
    assert "('" + f"{1:032x}', '(none)')" in batched[2]  # trace 1 (i = 0): no carrier


def test_servers_past_their_client_on_one_host_or_another_agree_in_batches(tmp_path):
    """The app's server span ends 1 ms after the gateway's CLIENT span: on the
    gateway's host (one clock, a stream's tail: times kept) or on another (clock skew:
    shifted back inside); the batches take both and agree."""
    traces = [([], [0.2 + 0.7 * ((i * 37 + k * 11) % 10) / 10 for k in range(len(_CHAIN))])
              for i in range(40)]  # fmt: skip
    path = _write(tmp_path / "spans.jsonl", traces)
    objs = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    spans = [s for o in objs for rs in o["resourceSpans"] for s in rs["scopeSpans"][0]["spans"]]
    client_end = {
        s["traceId"]: int(s["endTimeUnixNano"]) for s in spans if s["spanId"] == f"{5:016x}"
    }
    for s in spans:
        number = int(s["traceId"], 16) - 1
        if s["name"] == "POST /v1/chat":
            s["attributes"].append({"key": "host.name", "value": otlp_value("a")})
        elif s["name"] == "POST /generate":
            host = "b" if number % 2 else "a"
            s["attributes"].append({"key": "host.name", "value": otlp_value(host)})
            s["endTimeUnixNano"] = str(client_end[s["traceId"]] + MS)
    path.write_bytes(b"\n".join(map(orjson.dumps, objs)) + b"\n")
    scalar, batched, taken = _both(path)
    assert batched == scalar
    assert taken >= 3 * (20 - 1)  # the one-host traces (skewed ones go scalar, as ever)
    for trace_id, spans in load([str(path)]).traces.items():
        issues = Warnings()
        prepared = prepare(trace_id, spans, issues)
        assert prepared is not None
        if (int(trace_id, 16) - 1) % 2:  # another host: the app's five spans shifted
            assert issues.skew_adjusted >= 5 and not prepared.one_clock
        else:  # one host: nothing shifted, the gateway's CLIENT span not widened
            assert issues.skew_adjusted == 0 and prepared.one_clock == {5}
            assert prepared.end[5] - prepared.end[4] == 1_000_000
