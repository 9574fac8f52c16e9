"""``hoptrace check``: latency budgets with pass/fail lines and exit codes."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.helpers import hoptrace
from tests.synthetic import SEED_MS, chain_trace, to_otlp_json

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "budget-demo.toml"


@pytest.fixture(scope="module")
def seed(tmp_path_factory) -> Path:
    """20 traces of the seed chain: 1,600 ms each, inference 1,000 ms (62.5%)."""
    path = tmp_path_factory.mktemp("check") / "seed.jsonl"
    lines = [
        orjson.dumps(
            to_otlp_json(chain_trace(f"{i + 1:032x}", T0 + i * 5000 * MS, model_ttft_ms=150.0))
        )
        for i in range(20)
    ]
    path.write_bytes(b"\n".join(lines))
    return path


def _budget(tmp_path: Path, text: str) -> str:
    path = tmp_path / "budget.toml"
    path.write_text(text)
    return str(path)


def test_budget_met_exits_0_with_a_pass_line_per_limit(seed, tmp_path):
    budget = _budget(
        tmp_path,
        "[e2e]\np50_ms = 1700\np90_ms = 1700\n[stage.inference]\nshare_max = 0.7\np90_ms = 1000\n",
    )
    done = hoptrace("check", str(seed), "--budget", budget)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines[:4]] == ["PASS"] * 4
    assert "e2e p50_ms" in lines[0] and "1,600.0 ms <= 1,700.0 ms" in lines[0]
    assert "stage.inference share_max" in lines[2] and "0.625 <= 0.7" in lines[2]
    # p90 exactly at the limit passes (at or under).
    assert "1,000.0 ms <= 1,000.0 ms" in lines[3]
    assert lines[-1] == "4 of 4 limits met over 20 traces"


def test_budget_exceeded_exits_1_and_names_the_line(seed, tmp_path):
    budget = _budget(tmp_path, "[e2e]\np50_ms = 700\n[stage.inference]\nshare_max = 0.5\n")
    done = hoptrace("check", str(seed), "--budget", budget)
    assert done.returncode == 1
    assert "FAIL  e2e p50_ms" in done.stdout and "1,600.0 ms > 700.0 ms" in done.stdout
    assert "FAIL  stage.inference share_max  0.625 > 0.5" in done.stdout
    assert done.stdout.splitlines()[-1].endswith("; 2 exceeded")
    js = hoptrace("check", str(seed), "--budget", budget, "--format", "json")
    assert js.returncode == 1
    data = orjson.loads(js.stdout)
    assert data["passed"] is False
    assert [c["measured"] for c in data["checks"]] == [pytest.approx(1600.0), 0.625]


def test_after_a_100x_model_the_network_budget_fails(tmp_path):
    """The seed story as a CI gate: with inference at 10 ms, the rest dominates."""
    path = tmp_path / "fast.jsonl"
    path.write_bytes(
        b"\n".join(
            orjson.dumps(
                to_otlp_json(
                    chain_trace(f"{i + 1:032x}", T0 + i * 5000 * MS, {**SEED_MS, "inference": 10})
                )
            )
            for i in range(12)
        )
    )
    budget = _budget(tmp_path, "[e2e]\np50_ms = 700\n[stage.network]\nshare_max = 0.25\n")
    done = hoptrace("check", str(path), "--budget", budget)
    assert done.returncode == 1
    assert "PASS  e2e p50_ms" in done.stdout and "610.0 ms <= 700.0 ms" in done.stdout
    assert "FAIL  stage.network share_max" in done.stdout


def test_the_documented_demo_budget_parses_and_passes_the_seed_chain(seed):
    done = hoptrace("check", str(seed), "--budget", str(EXAMPLE))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASS") == 7


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[e2e]\np95_ms = 1\n", "[e2e] has unknown key 'p95_ms'; allowed: p50_ms, p90_ms, p99_ms"),
        ("[e2e]\nshare_max = 0.5\n", "[e2e] has unknown key 'share_max'"),
        ("[stage.inferance]\np90_ms = 1\n", "stages the traces do not have: inferance"),
        ("[latency]\np90_ms = 1\n", "unknown table [latency]; use [e2e], [ttft] or [stage.NAME]"),
        ("[stage.inference]\nshare_max = 50\n", "share_max is a fraction of the time (0..1)"),
        ("[e2e]\np50_ms = 'fast'\n", "p50_ms must be a number"),
        ("[e2e\np50_ms = 1\n", "is not valid TOML"),
        ("", "sets no limits"),
    ],
)
def test_bad_budgets_are_one_clear_line_and_exit_2(seed, tmp_path, text, message):
    done = hoptrace("check", str(seed), "--budget", _budget(tmp_path, text))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hoptrace: error: ")
    assert message in lines[0]


def test_ttft_budget_needs_first_token_marks(tmp_path):
    path = tmp_path / "plain.jsonl"
    path.write_bytes(orjson.dumps(to_otlp_json(chain_trace("a" * 32, T0))))
    done = hoptrace("check", str(path), "--budget", _budget(tmp_path, "[ttft]\np90_ms = 500\n"))
    assert done.returncode == 2
    assert "no trace carries a first-token mark" in done.stderr


def test_missing_budget_file(seed, tmp_path):
    done = hoptrace("check", str(seed), "--budget", str(tmp_path / "nope.toml"))
    assert done.returncode == 2
    assert "does not exist" in done.stderr


def test_run_filter_keeps_the_traces_of_onehoptrace(tmp_path):
    lines = []
    for i in range(6):
        spans = chain_trace(f"{i + 1:032x}", T0 + i * 5000 * MS)
        root = next(s for s in spans if s.parent_id is None)
        root.attributes["hoptrace.run"] = f"bench-1-c{1 if i < 2 else 8}"
        lines.append(orjson.dumps(to_otlp_json(spans)))
    path = tmp_path / "runs.jsonl"
    path.write_bytes(b"\n".join(lines))
    for pattern, count in (("bench-1-c8", 4), ("bench-1-c*", 6), ("*-c1", 2)):
        done = hoptrace("analyze", str(path), "--run", pattern, "--format", "json")
        assert done.returncode == 0, done.stderr
        assert orjson.loads(done.stdout)["traces"] == count
    none = hoptrace("analyze", str(path), "--run", "demo-*")
    assert none.returncode == 2 and "no trace" in none.stderr
