"""SLOs: the ``--slo`` parser, and ``hoptrace analyze --slo``'s attainment over traces
and where the traces that miss lose the time."""

from __future__ import annotations

import orjson
import pytest

from tests.helpers import hoptrace
from tests.synthetic import SEED_MS, chain_trace, to_otlp_json
from tracer._errors import ConfigError
from tracer.analysis.checks.slo import TRACE_METRICS, Slo, parse_slo

T0 = 1_700_000_000_000_000_000
MS = 1_000_000


def test_limits_take_ms_and_s_in_the_reported_order():
    slo = parse_slo("e2e=2s, TTFT=200ms,itl=0.5ms,tpot=1e1ms")
    assert slo == Slo((("ttft", 200.0), ("tpot", 10.0), ("itl", 0.5), ("e2e", 2000.0)))
    assert slo.limit_ms("e2e") == 2000.0 and slo.limit_ms("nope") is None
    assert slo.describe() == "ttft <= 200 ms, tpot <= 10 ms, itl <= 0.5 ms, e2e <= 2,000 ms"
    assert slo.as_dict() == {"ttft_ms": 200.0, "tpot_ms": 10.0, "itl_ms": 0.5, "e2e_ms": 2000.0}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "--slo must be METRIC=LIMIT[,METRIC=LIMIT]"),
        ("ttft", "got 'ttft'"),
        ("ttft=", "got 'ttft='"),
        ("latency=2s", "'latency' is not a metric; use one of ttft, tpot, itl, e2e"),
        ("ttft=200", "must be a number with a unit, ms or s (200ms, 2s), got '200'"),
        ("ttft=200us", "got '200us'"),
        ("ttft=fast", "got 'fast'"),
        ("ttft=0ms", "must be positive"),
        ("ttft=1s,ttft=2s", "'ttft' is given twice"),
    ],
)
def test_bad_slos_are_one_config_error_naming_the_option(text, says):
    with pytest.raises(ConfigError, match="--slo") as caught:
        parse_slo(text)
    assert says in str(caught.value)


def test_a_metric_the_command_cannot_judge_is_refused_by_name():
    with pytest.raises(ConfigError, match=r"'tpot' is not a metric here; use one of ttft, e2e"):
        parse_slo("tpot=20ms", metrics=TRACE_METRICS)


@pytest.fixture
def traces(tmp_path):
    """20 seed traces (1,600 ms); the last five spend 400 ms more in the gateway, and
    every tenth has no first-token mark."""
    lines = []
    for i in range(1, 21):
        ms = dict(SEED_MS)
        if i > 15:
            ms["gateway"] += 400.0
        trace = chain_trace(
            f"{i:032x}", T0 + i * 5000 * MS, ms, model_ttft_ms=100.0 if i % 10 else None
        )
        lines.append(orjson.dumps(to_otlp_json(trace)))
    path = tmp_path / "traces.jsonl"
    path.write_bytes(b"\n".join(lines))
    return path


def test_analyze_slo_json_reports_attainment_and_where_it_is_lost(traces):
    plain = orjson.loads(hoptrace("analyze", str(traces), "--format", "json").stdout)
    proc = hoptrace("analyze", str(traces), "--slo", "ttft=1s,e2e=1.8s", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    out = orjson.loads(proc.stdout)
    assert {k: v for k, v in out.items() if k != "slo"} == plain  # keys only added
    slo = out["slo"]
    # Five traces take 2,000 ms; one fast trace has no time to first token.
    assert (slo["traces"], slo["meeting"], slo["missing"]) == (20, 14, 6)
    assert slo["attainment"] == 0.7 and slo["without_ttft"] == 2
    assert slo["attainment_by_metric"] == {"ttft": 0.9, "e2e": 0.75}
    assert slo["limits_ms"] == {"ttft": 1000.0, "e2e": 1800.0}
    top, *rest = slo["lost_by"]
    assert top["name"] == "gateway"
    assert top["missing_mean_ms"] == pytest.approx((5 * 480 + 80) / 6, abs=1e-3)
    assert top["meeting_mean_ms"] == pytest.approx(80.0)
    assert top["extra_ms"] == pytest.approx(top["missing_mean_ms"] - 80.0, abs=1e-3)
    assert all(g["extra_ms"] == pytest.approx(0.0) for g in rest)


def test_analyze_slo_table_names_the_stage_where_it_is_lost(traces):
    proc = hoptrace("analyze", str(traces), "--slo", "e2e=1.8s")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "SLO e2e <= 1,800 ms: 75.0% of 20 traces meet it" in text
    assert "where the SLO is lost: gateway took 400.0 ms more (mean)" in text
    assert "+400.0" in text


def test_analyze_slo_when_every_trace_meets_it(traces):
    out = orjson.loads(
        hoptrace("analyze", str(traces), "--slo", "e2e=5s", "--format", "json").stdout
    )
    assert out["slo"]["attainment"] == 1.0 and out["slo"]["lost_by"] == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--slo", "tpot=20ms"), "'tpot' is not a metric here"),
        (("--slo", "e2e=2s", "--split-by", "gen_ai.request.model"), "drop --split-by"),
        (("--slo", "e2e=2"), "must be a number with a unit"),
    ],
)
def test_analyze_rejects_a_bad_slo_in_one_line(traces, args, says):
    proc = hoptrace("analyze", str(traces), *args)
    assert proc.returncode == 2
    assert says in proc.stderr and proc.stderr.strip().count("\n") == 0, proc.stderr
