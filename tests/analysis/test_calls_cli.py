"""``--repeat`` and ``--fanout`` on ``hoptrace whatif`` and ``hoptrace report``: the
projection with the calls, the most calls within an SLO, the cost of the calls, and
one clear line for a bad value."""

from __future__ import annotations

import orjson
import pytest

from tests.analysis.test_loadmodel import T0, _pool_run
from tests.helpers import hoptrace
from tests.synthetic import chain_trace, to_otlp_json

S = 1_000_000_000


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("calls")
    loaded = folder / "loaded.jsonl"
    loaded.write_bytes(b"\n".join(orjson.dumps(to_otlp_json(t)) for t in _pool_run()))
    idle = folder / "idle.jsonl"
    traces = [
        chain_trace(f"{i + 1:032x}", T0 + i * 10 * S, tokens=(100, 20), model_ttft_ms=200)
        for i in range(30)
    ]
    idle.write_bytes(b"\n".join(orjson.dumps(to_otlp_json(t)) for t in traces))
    return loaded, idle


def _json(*args: str) -> dict:
    proc = hoptrace("whatif", *args, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return orjson.loads(proc.stdout)


def test_whatif_projects_the_calls_with_the_speedup_under_load(files):
    loaded, _ = files
    out = _json(str(loaded), "--stage", "inference.decode", "--speedup", "10", "--repeat",
                "inference=2")  # fmt: skip
    # 8 clients, 2 slots each held 28 ms twice a request: 8 x 56 / 2 = 224 ms.
    assert out["model"] == "load" and out["after_ms"]["p50"] == pytest.approx(224.0, rel=0.02)
    assert out["change"] == "inference.decode 10x faster and inference called 2 times in sequence"
    assert out["calls"] == [{"stage": "inference", "n": 2, "arrangement": "sequence"}]
    assert out["afford"] is None and out["cost_per_request"] is None
    best = _json(str(loaded), "--fanout", "inference=2")
    assert best["calls"] == [{"stage": "inference", "n": 2, "arrangement": "parallel"}]
    assert best["speedup"] == 1.0 and best["after_ms"]["p50"] == pytest.approx(800.0, rel=0.02)


def test_whatif_finds_the_most_calls_within_the_slo(files):
    loaded, _ = files
    out = _json(str(loaded), "--stage", "inference.decode", "--speedup", "10", "--repeat",
                "inference=max", "--slo", "e2e=500ms")  # fmt: skip
    afford = out["afford"]
    assert afford["calls"] == 4 and afford["arrangement"] == "sequence"
    assert afford["slo"] == {"e2e_ms": 500.0} and afford["attainment_target"] == 0.9
    assert afford["p50_ms"] == pytest.approx(448.0, rel=0.02) and afford["model"] == "load"
    assert afford["goodput_per_s"] == pytest.approx(out["slo"]["goodput_per_s"]["after"])
    assert out["after_ms"]["p50"] == afford["p50_ms"]
    table = hoptrace("whatif", str(loaded), "--stage", "inference.decode", "--speedup", "10",
                     "--repeat", "inference=max", "--slo", "e2e=500ms")  # fmt: skip
    assert table.returncode == 0, table.stderr
    assert "4 inference calls in sequence fit: P50 448 ms" in table.stdout


def test_the_cost_of_a_request_scales_with_the_models_calls(files):
    _, idle = files
    out = _json(str(idle), "--stage", "inference", "--speedup", "100", "--fanout",
                "inference=3", "--price", "*=1:2")  # fmt: skip
    # 100 tokens in at 1 and 20 out at 2 per 1,000: 0.14 a call, three calls.
    assert out["cost_per_request"] == {"before": 0.14, "after": pytest.approx(0.42)}
    assert out["model"] == "retime"


def test_report_shows_the_calls_on_the_page(files, tmp_path):
    loaded, _ = files
    page = tmp_path / "report.html"
    made = hoptrace("report", str(loaded), "--stage", "inference.decode", "--speedup", "10",
                    "--repeat", "inference=max", "--slo", "e2e=500ms", "-o", str(page))  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "model: load, the run's load simulated" in made.stderr
    html = page.read_text(encoding="utf-8")
    assert "What if: inference.decode 10x faster and inference called 4 times in sequence" in html
    assert "4 inference calls in sequence fit: P50 448 ms" in html


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ("--repeat", "inference=0"),
            "--repeat inference=N: N must be a whole number from 1 to 64",
        ),
        (("--fanout", "inference"), "--fanout must be STAGE=N"),
        (("--repeat", "inference=two"), "or max, got 'two'"),
        (("--repeat", "inference=max"), "--repeat inference=max needs --slo"),
        (("--repeat", "a=max", "--fanout", "b=max", "--slo", "e2e=1s"), "only one --repeat"),
        (("--repeat", "inference=2", "--fanout", "inference.decode=2"), "called more than once"),
        (("--stage", "inference"), "--stage and --speedup go together"),
        ((), "give --stage and --speedup, --repeat or --fanout"),
    ],
)
def test_a_bad_value_is_one_line_and_exit_2(files, args, says):
    loaded, _ = files
    proc = hoptrace("whatif", str(loaded), *args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and says in proc.stderr
