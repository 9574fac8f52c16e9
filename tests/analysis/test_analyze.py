"""The analyzer on the seed example, parallel work, skew, streams and real fixtures."""

from __future__ import annotations

import orjson
import pytest

from tests.synthetic import SEED_MS, chain_trace, to_jaeger_json, to_otlp_json
from tracer.analysis import TraceSet, analyze, load, what_if
from tracer.spans.model import KIND_CLIENT, KIND_INTERNAL, KIND_SERVER, Span

MS = 1_000_000
T0 = 1_700_000_000_000_000_000


def _set(*traces: list[Span]) -> TraceSet:
    ts = TraceSet()
    for spans in traces:
        ts.add(spans)
    return ts


def _span(tid, sid, parent, service, start_ms, end_ms, stage=None, kind=KIND_INTERNAL, name=None):
    return Span(
        tid,
        sid,
        parent,
        service,
        name or sid,
        kind,
        T0 + int(start_ms * MS),
        T0 + int(end_ms * MS),
        stage,
        0,
        None,
        {},
    )


def test_seed_chain_attributes_1000ms_inference_in_1600ms():
    result = analyze(_set(chain_trace("1" * 32, T0)))
    groups = {g.name: g for g in result.groups}
    assert result.e2e.p50 == pytest.approx(1600.0)
    assert groups["inference"].mean_ms == pytest.approx(1000.0)
    assert groups["inference"].share == pytest.approx(1000 / 1600)
    assert groups["network"].mean_ms == pytest.approx(180.0)
    assert sum(g.share for g in result.groups) == pytest.approx(1.0)
    hops = {(h.source, h.target): h.mean_ms for h in result.hops}
    assert hops == pytest.approx(
        {("client", "gateway"): 120.0, ("gateway", "app"): 40.0, ("app", "model"): 20.0}
    )


def test_whatif_inference_100x_gives_610ms_and_2_6x():
    projection = what_if(_set(chain_trace("2" * 32, T0)), "inference", 100)
    assert projection.before.p50 == pytest.approx(1600.0)
    assert projection.after.p50 == pytest.approx(610.0)
    assert projection.realized["p50"] == pytest.approx(1600 / 610)
    assert round(projection.realized["p50"], 1) == 2.6
    after = dict(projection.after_groups)
    assert after["inference"] == pytest.approx(10 / 610, rel=1e-4)
    assert sum(after.values()) == pytest.approx(1.0)


def test_parallel_children_slower_one_is_on_critical_path():
    tid = "3" * 32
    spans = [
        _span(tid, "a", None, "svc", 0, 100, stage="gateway"),
        _span(tid, "b", "a", "svc", 10, 90, stage="inference"),  # slow
        _span(tid, "c", "a", "svc", 10, 50, stage="context"),  # parallel, hidden
    ]
    result = analyze(_set(spans))
    groups = {g.name: g.mean_ms for g in result.groups}
    assert groups == pytest.approx({"gateway": 20.0, "inference": 80.0})


def test_whatif_speeding_up_slow_sibling_makes_hidden_one_critical():
    tid = "4" * 32
    spans = [
        _span(tid, "a", None, "svc", 0, 100, stage="gateway"),
        _span(tid, "b", "a", "svc", 10, 90, stage="inference"),
        _span(tid, "c", "a", "svc", 10, 50, stage="context"),
    ]
    projection = what_if(_set(spans), "inference", 10)
    # inference shrinks to 8 ms but context (40 ms) now bounds the parent: 10 + 40 + 10.
    assert projection.after.p50 == pytest.approx(60.0)
    after = dict(projection.after_groups)
    assert after["context"] == pytest.approx(40 / 60)
    assert "inference" not in after


def test_sequential_siblings_overlapping_by_a_microsecond_stay_on_path():
    tid = "5" * 32
    spans = [
        _span(tid, "a", None, "svc", 0, 100, stage="gateway"),
        _span(tid, "b", "a", "svc", 0, 50.001, stage="auth"),
        _span(tid, "c", "a", "svc", 50, 100, stage="inference"),
    ]
    groups = {g.name: g.mean_ms for g in analyze(_set(spans)).groups}
    assert groups["auth"] == pytest.approx(50.0)
    assert groups["inference"] == pytest.approx(50.0)


def test_clock_skewed_remote_child_is_centred_and_counted():
    tid = "6" * 32
    spans = [
        _span(tid, "r", None, "client", 0, 100, stage="client"),
        _span(tid, "c", "r", "client", 10, 90, kind=KIND_CLIENT),
        # The server's clock runs 500 ms ahead: 60 ms of work shown at 520..580.
        _span(tid, "s", "c", "server", 520, 580, stage="gateway", kind=KIND_SERVER),
        _span(tid, "s2", "s", "server", 530, 570, stage="auth"),
    ]
    result = analyze(_set(spans))
    groups = {g.name: g.mean_ms for g in result.groups}
    assert result.warnings.skew_adjusted == 2
    assert groups == pytest.approx({"client": 20.0, "network": 20.0, "gateway": 20.0, "auth": 40.0})
    assert sum(groups.values()) == pytest.approx(100.0)


def test_streaming_client_span_that_ends_at_headers_is_widened_not_skewed():
    tid = "7" * 32
    spans = [
        _span(tid, "r", None, "client", 0, 1000, stage="client"),
        _span(tid, "c", "r", "client", 10, 60, kind=KIND_CLIENT),  # ends at headers
        _span(tid, "s", "c", "server", 20, 990, stage="inference", kind=KIND_SERVER),
    ]
    result = analyze(_set(spans))
    groups = {g.name: g.mean_ms for g in result.groups}
    assert result.warnings.skew_adjusted == 0
    # The CLIENT span is taken to end with its child at 990: network is 10..20 only.
    assert groups == pytest.approx({"client": 20.0, "network": 10.0, "inference": 970.0})


def test_streaming_ttft_is_attributed_and_model_ttft_kept_apart():
    spans = chain_trace("8" * 32, T0, model_ttft_ms=200.0)
    result = analyze(_set(spans))
    # Before the first token: client half, network legs to the model, gateway half,
    # auth, context, and 200 ms of the model; the return legs bring the token back.
    outside = 30 + 60 + 40 + 90 + 20 + 100 + 10
    assert result.model_ttft.p50 == pytest.approx(200.0)
    assert result.ttft.p50 == pytest.approx(outside + 200.0 + 90.0)  # +90: legs back (60+20+10)
    ttft = {g.name: g.ttft_share for g in result.groups}
    assert sum(v for v in ttft.values() if v) == pytest.approx(1.0)
    assert ttft["inference"] == pytest.approx(200.0 / result.ttft.p50)


def test_orphans_are_reparented_to_longest_root():
    tid = "9" * 32
    spans = [
        _span(tid, "a", None, "svc", 0, 100, stage="gateway"),
        _span(tid, "b", "missing", "svc", 20, 40, stage="auth"),
    ]
    result = analyze(_set(spans))
    assert result.warnings.orphans == 1
    assert {g.name: g.mean_ms for g in result.groups} == pytest.approx(
        {"gateway": 80.0, "auth": 20.0}
    )


def test_parent_cycles_are_skipped_with_a_reason():
    tid = "a" * 32
    spans = [
        _span(tid, "a", None, "svc", 0, 100, stage="gateway"),
        _span(tid, "x", "y", "svc", 10, 20),
        _span(tid, "y", "x", "svc", 10, 20),
    ]
    result = analyze(_set(spans))
    assert result.warnings.skipped_spans == 2
    assert any("cycle" in m for m in result.warnings.messages)
    assert result.e2e.p50 == pytest.approx(100.0)


def test_tokens_are_counted_once_per_request_and_priced():
    from tracer.analysis.render import analysis_dict

    result = analyze(
        _set(*(chain_trace(f"{i:032x}", T0 + i * MS, tokens=(800, 200)) for i in range(1, 4)))
    )
    assert result.tokens.input_mean == pytest.approx(800)
    out = analysis_dict(result, {"sim-1": (0.5, 1.5)})
    # 0.5 per 1k input x 800 + 1.5 per 1k output x 200 = 0.7 per request
    assert out["tokens"]["cost_per_request"] == pytest.approx(0.7)
    assert out["tokens"]["cost_per_1k_requests"] == pytest.approx(700)


def test_same_traces_from_otlp_jaeger_and_store_give_same_numbers(tmp_path):
    from collector import SpanStore

    traces = [
        chain_trace(
            f"{i:032x}", T0 + i * 10 * MS, {**SEED_MS, "auth": 50.0 + i}, model_ttft_ms=100.0 + i
        )
        for i in range(1, 13)
    ]
    flat = [s for t in traces for s in t]
    otlp = tmp_path / "t.jsonl"
    otlp.write_bytes(b"\n".join(orjson.dumps(to_otlp_json(t)) for t in traces))
    jaeger = tmp_path / "t.json"
    jaeger.write_bytes(orjson.dumps(to_jaeger_json(flat)))
    store_path = tmp_path / "s.db"
    with SpanStore(store_path, create=True) as store:
        store.write(flat)
    results = [analyze(load([p])) for p in (otlp, jaeger, store_path)]
    reference = results[0]
    for other in results[1:]:
        assert other.traces == reference.traces == 12
        assert other.e2e.p90 == pytest.approx(reference.e2e.p90)
        assert other.ttft.p50 == pytest.approx(reference.ttft.p50)
        assert [(g.name, round(g.share, 9)) for g in other.groups] == [
            (g.name, round(g.share, 9)) for g in reference.groups
        ]


@pytest.mark.parametrize(
    "name",
    [
        "car_rental_otelcol_fileexporter.jsonl",
        "genai_agent_synthetic_jaeger_v1.json",
        "hotrod_apiv3_getTrace.json",
        "inference_api_jaeger_v1_search.json",
        "petclinic_jaeger_v1_trace.json",
    ],
)
def test_public_fixture_loads_and_service_shares_sum_to_one(fixtures_dir, name):
    result = analyze(load([fixtures_dir / name]), group_by="service")
    assert result.traces >= 1
    assert sum(g.share for g in result.groups) == pytest.approx(1.0)
    assert all(g.share >= 0 for g in result.groups)


def test_hotrod_critical_path_covers_root_exactly(fixtures_dir):
    from tracer.analysis import break_down, prepare
    from tracer.spans import Warnings

    traceset = load([fixtures_dir / "hotrod_apiv3_getTrace.json"])
    ((tid, spans),) = traceset.traces.items()
    trace = prepare(tid, spans, Warnings())
    b = break_down(trace, "operation")
    assert b.e2e_ns == 702_608_000 or abs(b.e2e_ns - 702_608_000) < 1000
    assert sum(b.groups.values()) == b.e2e_ns
    shares = {k: v / b.e2e_ns for k, v in b.groups.items()}
    assert shares["mysql: SQL SELECT"] == pytest.approx(0.366, abs=0.001)
    # jaeger-ui's walk does not clip at the cursor; ours does (docs/analysis.md), so the two
    # overlapping route calls split about 1 ms differently.
    assert shares["route: GET /route"] == pytest.approx(0.291, abs=0.003)
    assert shares["redis-manual: GetDriver"] == pytest.approx(0.291, abs=0.003)


def test_inference_fixture_duplicate_span_is_kept_once(fixtures_dir):
    result = analyze(load([fixtures_dir / "inference_api_jaeger_v1_search.json"]))
    assert result.traces == 10
    assert result.spans == 10  # 11 in the file, one duplicated


def test_car_rental_orphans_are_counted(fixtures_dir):
    result = analyze(load([fixtures_dir / "car_rental_otelcol_fileexporter.jsonl"]))
    assert result.traces == 3
    assert result.spans == 68  # 83 lines of spans, 15 duplicates
    # one second root in trace 68876d36..., and 40 of the 41 parentless SELECTs of ad02bc3f...
    assert result.warnings.orphans == 41


def test_whatif_on_a_parent_chain_of_30000_spans_needs_no_recursion():
    # Each span calls the next: 30,000 levels deep, past any recursion limit.
    depth = 30_000
    spans = [
        _span("d" * 32, f"{i + 1:016x}", f"{i:016x}" if i else None, "svc", i * 0.01, 1000 - i * 0.01,
              stage="inference" if i % 2 else "context")
        for i in range(depth)
    ]  # fmt: skip
    projection = what_if(_set(spans), "inference", 2)
    result = analyze(_set(spans))
    inference = next(g for g in result.groups if g.name == "inference")
    # Amdahl on a chain: e' = e - a_inference * (1 - 1/k).
    expected = result.e2e.p50 - inference.mean_ms * 0.5
    assert projection.after.p50 == pytest.approx(expected, rel=1e-9)


def test_whatif_anchors_siblings_the_same_with_many_children():
    # 2,000 sequential children under one parent, each anchored on the one before: a 2x
    # faster stage halves every child, and the parent's own gaps stay.
    children = [
        _span("e" * 32, f"{i + 2:016x}", "0000000000000001", "svc", 1 + i * 2, 2 + i * 2,
              stage="inference")
        for i in range(2000)
    ]  # fmt: skip
    root = _span("e" * 32, "0000000000000001", None, "svc", 0, 4001, stage="gateway")
    projection = what_if(_set([root, *children]), "inference", 2)
    # before: 4001 ms; after: 2000 children of 0.5 ms plus 2001 ms of the root's own gaps.
    assert projection.after.p50 == pytest.approx(2000 * 0.5 + 2001, rel=1e-9)
