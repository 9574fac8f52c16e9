"""A trace's weight travels from the sampler's trace state through every format and the
store to the analyzer; weights that cannot be known are counted and flagged."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import msgspec
import orjson
import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from collector import SpanStore
from tests.collector.test_receiver import _otlp_json
from tests.synthetic import SEED_MS, SeededIds, chain_trace, to_jaeger_json, to_otlp_json
from tracer import attributes as attrs
from tracer.analysis.aggregate import analyze
from tracer.analysis.loaders import load
from tracer.analysis.model.traceset import TraceSet
from tracer.analysis.sampling.weights import trace_weight
from tracer.cli import main
from tracer.sampling.samplers import ConsistentProbabilitySampler
from tracer.sdk.json_export import encode
from tracer.spans.model import Span, Warnings
from tracer.spans.otlp import spans_from_otlp_json, spans_from_otlp_proto

_T0 = 1_700_000_000_000_000_000


def _sdk_spans(ratio: float, traces: int) -> list:
    memory = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "svc"}),
        sampler=ConsistentProbabilitySampler(ratio),
    )
    provider.add_span_processor(SimpleSpanProcessor(memory))
    t = provider.get_tracer("t")
    for _ in range(traces):
        with t.start_as_current_span("root", attributes={attrs.STAGE: "gateway"}):
            with t.start_as_current_span("inner", attributes={attrs.STAGE: "inference"}):
                pass
    return list(memory.get_finished_spans())


def test_protobuf_and_both_json_encoders_carry_the_trace_state():
    readable = _sdk_spans(0.5, 40)
    assert readable
    proto = list(spans_from_otlp_proto(encode_spans(readable), Warnings()))
    body = _otlp_json(readable)  # the SDK's own JSON mapping, ids in hex
    from_json = list(spans_from_otlp_json(body, Warnings()))
    ours = list(spans_from_otlp_json(orjson.loads(encode(readable)), Warnings()))
    for spans in (proto, from_json, ours):
        assert len(spans) == len(readable)
        assert {s.trace_state for s in spans} == {"ot=th:8"}


def test_files_in_otlp_and_jaeger_json_give_the_weight(tmp_path: Path):
    spans = [
        msgspec.structs.replace(s, trace_state="vendor=1,ot=th:c")  # 25%: weight 4
        for i in range(20)
        for s in chain_trace(f"{i + 1:032x}", _T0 + i * 10**9, SEED_MS)
    ]
    (tmp_path / "t.otlp.json").write_text(json.dumps(to_otlp_json(spans)))
    (tmp_path / "t.jaeger.json").write_text(json.dumps(to_jaeger_json(spans)))
    for name in ("t.otlp.json", "t.jaeger.json"):
        a = analyze(load([tmp_path / name]))
        assert a.sample is not None, name
        assert a.sample.kept == 20 and a.sample.estimated_traces == pytest.approx(80)
        assert a.columns.weight is not None and set(a.columns.weight.tolist()) == {4.0}


def test_the_store_keeps_the_trace_state_and_an_older_store_gets_the_column(tmp_path: Path):
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old)
    conn.executescript(
        "CREATE TABLE spans (trace_id TEXT NOT NULL, span_id TEXT NOT NULL, parent_id TEXT,"
        " service TEXT NOT NULL, name TEXT NOT NULL, kind INTEGER NOT NULL,"
        " start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, stage TEXT,"
        " status INTEGER NOT NULL, first_token_ns INTEGER, attributes BLOB NOT NULL);"
        "INSERT INTO spans VALUES ('" + "1" * 32 + "', '" + "2" * 16 + "', NULL, 's', 'n', 1,"
        " 10, 20, NULL, 0, NULL, '{}');"
    )
    conn.commit()
    conn.close()
    with SpanStore(old, read_only=True) as store:  # read as it is: no trace state
        assert [s.trace_state for s in store.iter_spans()] == [None]
    span = Span("3" * 32, "4" * 16, None, "s", "n", 1, 30, 40, trace_state="ot=th:e666")
    with SpanStore(old) as store:  # opened for writing: the column is added
        store.write([span])
    with SpanStore(old, read_only=True) as store:
        assert sorted(str(s.trace_state) for s in store.iter_spans()) == ["None", "ot=th:e666"]


def _with(spans: list[Span], **states: str | None) -> list[Span]:
    """The spans with trace states by name (``root``, ``child``)."""
    out = []
    for s in spans:
        key = "root" if s.parent_id is None else "child"
        out.append(msgspec.structs.replace(s, trace_state=states.get(key, s.trace_state)))
    return out


@pytest.mark.parametrize(
    ("root", "child", "attributes", "expected"),
    [
        ("ot=th:e666", "ot=th:e666", {}, (pytest.approx(9.99938968568813), True)),
        ("ot=th:0", "ot=th:0", {}, (1.0, True)),
        (None, None, {}, (1.0, True)),
        ("ot=rv:00000000000001", "ot=rv:00000000000001", {}, (1.0, False)),  # no th
        ("ot=th:e666", "ot=th:8", {}, (1.0, False)),  # spans disagree
        (None, "ot=th:8", {}, (1.0, False)),
        (None, None, {attrs.SAMPLING_PROBABILITY: 0.25}, (4.0, True)),
        (None, None, {attrs.SAMPLE_RATE: 20}, (20.0, True)),
        (None, None, {attrs.SAMPLING_PROBABILITY: 0.0}, (1.0, False)),
        (None, None, {attrs.SAMPLE_RATE: "many"}, (1.0, False)),
    ],
)
def test_a_traces_weight_comes_from_its_root_or_is_unknown(root, child, attributes, expected):
    spans = _with(chain_trace("a" * 32, _T0, SEED_MS), root=root, child=child)
    spans[0].attributes.update(attributes)
    assert trace_weight(spans, spans[0]) == expected


def test_traces_of_unknown_weight_are_counted_and_flagged():
    ts = TraceSet()
    for i in range(30):
        spans = chain_trace(f"{i + 1:032x}", _T0 + i * 10**9, SEED_MS)
        state = "ot=th:c" if i < 20 else "ot=rv:00000000000001"  # 10 tail-sampled
        ts.add(_with(spans, root=state, child=state))
    a = analyze(ts)
    assert a.sample is not None and a.sample.unknown_weight == 10
    assert a.sample.estimated_traces == pytest.approx(20 * 4 + 10)
    assert any(
        "10 of 30 traces were sampled with no known probability" in m for m in a.warnings.messages
    )


def _budget(tmp_path: Path, text: str) -> str:
    path = tmp_path / "budget.toml"
    path.write_text(text)
    return str(path)


def test_check_passes_fails_or_says_the_sample_is_too_small(tmp_path: Path):
    spans = [
        msgspec.structs.replace(s, trace_state="ot=th:e666")
        for i in range(200)
        for s in chain_trace(
            f"{i + 1:032x}", _T0 + i * 10**9, {**SEED_MS, "inference": 900.0 + (i % 20) * 10}
        )
    ]
    source = tmp_path / "sampled.json"
    source.write_text(json.dumps(to_otlp_json(spans)))
    runner = CliRunner()
    cases = [
        ("[e2e]\np50_ms = 5000\n", 0, "PASS"),
        ("[e2e]\np50_ms = 100\n", 1, "FAIL"),
        ("[e2e]\np50_ms = 1595\n", 3, "UNDECIDED"),  # the P50 is 1,595 ms
    ]
    for text, code, word in cases:
        result = runner.invoke(main, ["check", str(source), "--budget", _budget(tmp_path, text)])
        assert result.exit_code == code, result.output
        assert result.output.startswith(word)
        assert "99% confidence intervals" in result.output
    result = runner.invoke(
        main,
        ["check", str(source), "--budget", _budget(tmp_path, cases[2][0]), "--format", "json"],
    )
    checks = json.loads(result.output)["checks"]
    assert checks[0]["verdict"] == "undecided"
    low, high = checks[0]["interval"]
    assert low <= 1595 < high


@pytest.mark.integration
def test_sampled_spans_reach_a_real_collector_and_are_weighted(collector_process):
    sampler = ConsistentProbabilitySampler(0.25)
    ids = SeededIds(25)  # the same 400 trace ids every run: no chance miss
    provider = TracerProvider(
        resource=Resource.create({"service.name": "sampled"}), sampler=sampler, id_generator=ids
    )
    exporter = OTLPSpanExporter(endpoint=collector_process.endpoint + "/v1/traces")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    t = provider.get_tracer("t")
    for _ in range(400):
        with t.start_as_current_span("root", attributes={attrs.STAGE: "gateway"}):
            with t.start_as_current_span("inner", attributes={attrs.STAGE: "inference"}):
                pass
    provider.shutdown()
    a = analyze(load([collector_process.store]))
    assert a.sample is not None and a.sample.unknown_weight == 0
    assert len(ids.trace_ids) == 400
    assert a.sample.kept == sum(map(sampler.keeps, ids.trace_ids))
    assert 50 <= a.sample.kept <= 150  # 100 expected, standard deviation 8.7
    assert a.sample.estimated_traces == 4 * a.sample.kept
    assert a.sample.interval.low <= 400 <= a.sample.interval.high


def test_the_table_and_the_page_show_the_intervals_of_a_sample(tmp_path: Path):
    spans = [
        msgspec.structs.replace(s, trace_state="ot=th:c")
        for i in range(40)
        for s in chain_trace(f"{i + 1:032x}", _T0 + i * 10**9, {**SEED_MS, "auth": 50.0 + i})
    ]
    source = tmp_path / "sampled.json"
    source.write_text(json.dumps(to_otlp_json(spans)))
    runner = CliRunner()
    table = runner.invoke(main, ["analyze", str(source)])
    assert table.exit_code == 0, table.output
    assert "these 40 traces stand for about 160" in table.output
    assert "99% confidence interval" in table.output
    page = tmp_path / "r.html"
    html = runner.invoke(main, ["analyze", str(source), "--format", "html", "-o", str(page)])
    assert html.exit_code == 0, html.output
    text = page.read_text()
    assert "these 40 traces stand for about 160" in text
    data = json.loads(runner.invoke(main, ["analyze", str(source), "--format", "json"]).output)
    auth = next(g for g in data["groups"] if g["name"] == "auth")
    low, high = auth["intervals"]["p50_ms"]
    assert low < auth["p50_ms"] < high
    assert f"{auth['p50_ms']:,.1f} ({low:,.1f}-{high:,.1f})" in text


def test_slo_attainment_and_goodput_of_a_sample_are_estimates_with_intervals():
    from tracer.analysis.checks.slo import parse_slo, slo_analysis

    ts = TraceSet()
    for i in range(100):  # one a second; half over 1.7 s end to end
        ms = {**SEED_MS, "inference": 1000.0 if i % 2 else 1200.0}
        ts.add(
            _with(
                chain_trace(f"{i + 1:032x}", _T0 + i * 10**9, ms), root="ot=th:c", child="ot=th:c"
            )
        )
    result = slo_analysis(analyze(ts).columns, parse_slo("e2e=1700ms"))
    assert result.meeting == 50 and result.attainment == pytest.approx(0.5)
    assert result.estimate is not None
    low, high = result.estimate[1].low, result.estimate[1].high
    assert low < 0.5 < high
    assert result.goodput_per_s is not None  # 200 of 400 estimated requests in 99 s
    assert result.goodput_per_s[0] == pytest.approx(200 / 99)
