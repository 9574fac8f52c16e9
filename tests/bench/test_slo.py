"""``hoptrace bench --slo``: goodput, SLO attainment per level and the highest level
that meets the SLO, on synthetic sweeps and through the command."""

from __future__ import annotations

import json
import threading

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.conftest import free_port, wait_http
from tests.helpers import hoptrace
from tracer._errors import ConfigError
from tracer.analysis.checks.slo import parse_slo
from tracer.analysis.checks.sweep import check_slo, judge_slo, level_slo, request_ms
from tracer.analysis.render import bench_dict, bench_sections, to_table
from tracer.bench import BenchResult, LevelResult, Sample, run_bench


def _sample(e2e_ms: float, ttft_ms: float | None = 100.0, status: str = "200") -> Sample:
    gaps = (10.0, 20.0, 30.0) if ttft_ms is not None else ()
    return Sample("0" * 32, status, e2e_ms, ttft_ms, gaps, 4)


def _level(c: int, samples: list[Sample], wall_s: float = 2.0) -> LevelResult:
    return LevelResult(c, f"r-c{c}", samples, wall_s)


def test_request_values_follow_the_documented_definitions():
    s = _sample(400.0, 100.0)
    assert request_ms(s, "e2e") == 400.0
    assert request_ms(s, "ttft") == 100.0
    assert request_ms(s, "tpot") == pytest.approx(100.0)  # (400 - 100) / (4 - 1)
    assert request_ms(s, "itl") == pytest.approx(20.0)  # mean of the chunk gaps
    one = Sample("0" * 32, "200", 150.0, 150.0, (), 1)
    assert request_ms(one, "tpot") == 0.0 and request_ms(one, "itl") == 0.0
    assert request_ms(_sample(400.0, None), "ttft") is None


def test_goodput_counts_successful_requests_within_every_limit_per_second():
    samples = [
        _sample(300.0, 100.0),  # meets both
        _sample(300.0, 150.0),  # meets both
        _sample(900.0, 100.0),  # e2e too long
        _sample(300.0, 250.0),  # ttft too long
        _sample(300.0, 100.0, status="500"),  # failed: misses whatever its times
    ]
    judged = level_slo(_level(4, samples, wall_s=0.5), parse_slo("ttft=200ms,e2e=0.5s"))
    assert (judged.requests, judged.meeting) == (5, 2)
    assert judged.attainment == pytest.approx(0.4)
    assert judged.goodput_per_s == pytest.approx(4.0)  # 2 requests in 0.5 s
    assert dict(judged.attainment_by_metric) == {"ttft": 0.6, "e2e": 0.6}


def test_highest_level_meeting_the_attainment_target():
    fast = [_sample(100.0)] * 10
    nine = [_sample(100.0)] * 9 + [_sample(5000.0)]
    slow = [_sample(100.0)] * 5 + [_sample(5000.0)] * 5
    levels = [_level(1, fast), _level(2, nine), _level(4, slow)]
    sweep = judge_slo(levels, parse_slo("e2e=1s"))
    assert [lv.attainment for lv in sweep.levels] == [1.0, 0.9, 0.5]
    assert sweep.max_concurrency == 2  # 90% meets the default target
    assert judge_slo(levels, parse_slo("e2e=1s"), 0.95).max_concurrency == 1
    assert judge_slo(levels, parse_slo("e2e=50ms")).max_concurrency is None


def test_stream_metrics_without_streaming_are_refused():
    with pytest.raises(ConfigError, match="ttft is measured on streams only"):
        check_slo(parse_slo("ttft=200ms,e2e=2s"), stream=False, attainment_target=0.9)
    check_slo(parse_slo("e2e=2s"), stream=False, attainment_target=0.9)
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(ConfigError, match="--slo-attainment must be a fraction"):
            check_slo(None, stream=True, attainment_target=bad)


def _result() -> BenchResult:
    levels = [
        _level(1, [_sample(100.0)] * 10, wall_s=1.0),
        _level(2, [_sample(100.0)] * 5 + [_sample(5000.0)] * 5, wall_s=2.5),
    ]
    result = BenchResult("http://h/v1", 8, True, "r", levels)
    result.slo = judge_slo(levels, parse_slo("ttft=200ms,e2e=1s"))
    return result


def test_json_adds_goodput_per_level_and_the_slo():
    data = bench_dict(_result())
    assert data["slo"] == {
        "limits_ms": {"ttft": 200.0, "e2e": 1000.0},
        "attainment_target": 0.9,
        "max_concurrency": 1,
    }
    c1, c2 = data["levels"]
    assert c1["slo"] == {
        "requests": 10,
        "meeting": 10,
        "attainment": 1.0,
        "goodput_per_s": 10.0,
        "attainment_by_metric": {"ttft": 1.0, "e2e": 1.0},
    }
    assert c2["slo"]["goodput_per_s"] == 2.0 and c2["slo"]["attainment"] == 0.5
    assert c2["requests_per_s"] == 4.0  # every key of before is still there


def test_json_without_slo_has_null_slo_keys():
    result = _result()
    result.slo = None
    data = bench_dict(result)
    assert data["slo"] is None and all(lv["slo"] is None for lv in data["levels"])


def test_table_shows_goodput_attainment_and_the_highest_level():
    text = to_table(bench_sections(_result()), width=200)
    assert "goodput/s" in text and "SLO met" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("│ 2 "))
    assert "2.00" in row and "50.0%" in row
    assert "SLO ttft <= 200 ms, e2e <= 1,000 ms: the highest level that meets it is 1" in text


def test_bench_rejects_a_bad_slo_in_one_line():
    for args, says in (
        (("--slo", "ttft=200"), "must be a number with a unit, ms or s"),
        (("--slo", "latency=2s"), "'latency' is not a metric; use one of ttft, tpot, itl, e2e"),
        (("--slo", "ttft=2s", "--no-stream"), "ttft is measured on streams only"),
        (("--slo", "e2e=2s", "--slo-attainment", "2"), "--slo-attainment must be a fraction"),
    ):
        proc = hoptrace("bench", "http://127.0.0.1:9/v1", *args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert says in proc.stderr and proc.stderr.strip().count("\n") == 0, proc.stderr


def _answer(request: Request) -> Response:
    events = [{"choices": [{"index": 0, "delta": {"content": w}}]} for w in ("a ", "b ")]
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    return Response(body + b"data: [DONE]\n\n", media_type="text/event-stream")


@pytest.fixture(scope="module")
def server():
    app = Starlette(routes=[Route("/v1/chat/completions", _answer, methods=["POST"])])
    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    wait_http(f"http://127.0.0.1:{port}/none")
    yield f"http://127.0.0.1:{port}/v1"
    srv.should_exit = True
    thread.join(timeout=10)


def test_a_real_sweep_reports_goodput_under_a_loose_and_a_tight_slo(server):
    loose = run_bench(
        server, levels=[1, 2], requests=6, warmup=0, max_tokens=2, slo=parse_slo("e2e=30s")
    )
    assert loose.slo is not None and loose.slo.max_concurrency == 2
    for lv, judged in zip(loose.levels, loose.slo.levels, strict=True):
        assert judged.attainment == 1.0
        assert judged.goodput_per_s == pytest.approx(lv.requests_per_s())
    tight = run_bench(
        server, levels=[1], requests=3, warmup=0, max_tokens=2, slo=parse_slo("ttft=0.001ms")
    )
    assert tight.slo is not None and tight.slo.levels[0].goodput_per_s == 0.0
    assert tight.slo.max_concurrency is None
