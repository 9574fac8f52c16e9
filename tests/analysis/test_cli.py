"""The analyze, whatif and compare commands: JSON contract, formats and errors."""

from __future__ import annotations

import orjson
import pytest

from tests.helpers import hoptrace
from tests.synthetic import SEED_MS, chain_trace, to_otlp_json

T0 = 1_700_000_000_000_000_000
MS = 1_000_000


@pytest.fixture
def seed_file(tmp_path):
    path = tmp_path / "seed.jsonl"
    lines = [
        orjson.dumps(
            to_otlp_json(
                chain_trace(f"{i:032x}", T0 + i * 5000 * MS, {**SEED_MS, "auth": 80.0 + 2 * i})
            )
        )
        for i in range(1, 21)
    ]
    path.write_bytes(b"\n".join(lines))
    return path


def test_analyze_json_follows_the_spec_contract(seed_file):
    proc = hoptrace("analyze", str(seed_file), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    out = orjson.loads(proc.stdout)
    assert out["traces"] == 20 and out["group_by"] == "stage"
    assert set(out["e2e_ms"]) >= {"n", "mean", "p50", "p90", "p99", "min", "max"}
    shares = [g["share"] for g in out["groups"]]
    assert shares == sorted(shares, reverse=True)
    assert sum(shares) == pytest.approx(1.0)
    assert out["groups"][0]["name"] == "inference"
    assert {(h["from"], h["to"]) for h in out["hops"]} == {
        ("client", "gateway"),
        ("gateway", "app"),
        ("app", "model"),
    }
    # The contract's keys, plus the count of conflicting duplicate spans (keys may be added).
    assert set(out["warnings"]) == {
        "orphans",
        "skew_adjusted",
        "skipped_traces",
        "skipped_spans",
        "messages",
        "duplicates",
        "dropped_values",
    }


def test_analyze_group_by_service_counts_network_apart(seed_file):
    out = orjson.loads(
        hoptrace("analyze", str(seed_file), "--group-by", "service", "--format", "json").stdout
    )
    names = {g["name"] for g in out["groups"]}
    assert names == {"client", "gateway", "app", "model", "network"}


def test_whatif_json_and_manager_sentence(seed_file):
    out = orjson.loads(
        hoptrace(
            "whatif", str(seed_file), "--stage", "inference", "--speedup", "100", "--format", "json"
        ).stdout
    )
    assert out["stage"] == "inference" and out["traces"] == 20
    assert out["realized_speedup"]["p50"] == pytest.approx(
        out["before_ms"]["p50"] / out["after_ms"]["p50"]
    )
    assert 2.4 < out["realized_speedup"]["p50"] < 2.8
    table = hoptrace("whatif", str(seed_file), "--stage", "inference", "--speedup", "100").stdout
    ratio = f"{out['realized_speedup']['p50']:.2f}x"
    assert f"inference 100x faster -> end-to-end {ratio} faster at P50" in table


def test_whatif_unknown_stage_names_the_known_ones(seed_file):
    proc = hoptrace("whatif", str(seed_file), "--stage", "infrence", "--speedup", "10")
    assert proc.returncode == 2
    assert "no span is in stage 'infrence'" in proc.stderr and "inference" in proc.stderr


def test_compare_names_the_group_that_moved_most(seed_file, tmp_path):
    fast = tmp_path / "fast.jsonl"
    fast.write_bytes(
        b"\n".join(
            orjson.dumps(
                to_otlp_json(
                    chain_trace(f"{i:032x}", T0 + i * 5000 * MS, {**SEED_MS, "inference": 10.0})
                )
            )
            for i in range(100, 120)
        )
    )
    out = orjson.loads(hoptrace("compare", str(seed_file), str(fast), "--format", "json").stdout)
    assert out["moved_most"] == "inference"
    assert out["groups"][0]["delta_mean_ms"] == pytest.approx(-990.0)
    assert out["e2e_ratio"]["p50"] < 0.45


def test_markdown_output_is_a_table(seed_file, tmp_path):
    target = tmp_path / "r.md"
    proc = hoptrace("analyze", str(seed_file), "--format", "markdown", "-o", str(target))
    assert proc.returncode == 0
    text = target.read_text()
    assert "| group | share |" in text and "| inference |" in text


def test_stage_map_assigns_stages_to_uninstrumented_traces(fixtures_dir, tmp_path):
    smap = tmp_path / "map.toml"
    smap.write_text(
        '[[rule]]\nservice = "mysql"\nstage = "context"\n'
        '[[rule]]\nservice = "route"\nstage = "inference"\n'
    )
    out = orjson.loads(
        hoptrace(
            "analyze",
            str(fixtures_dir / "hotrod_apiv3_getTrace.json"),
            "--stage-map",
            str(smap),
            "--format",
            "json",
        ).stdout
    )
    shares = {g["name"]: g["share"] for g in out["groups"]}
    assert shares["context"] == pytest.approx(0.366, abs=0.001)
    assert "inference" in shares


def test_bad_price_is_a_one_line_error(seed_file):
    proc = hoptrace("analyze", str(seed_file), "--price", "nonsense")
    assert proc.returncode == 2 and "MODEL=IN:OUT" in proc.stderr


def test_table_and_markdown_link_exemplars_to_the_jaeger_url_given(seed_file):
    for fmt in ("table", "markdown"):
        proc = hoptrace(
            "analyze", str(seed_file), "--format", fmt, "--jaeger-url", "http://jaeger.internal:9/"
        )
        assert proc.returncode == 0, proc.stderr
        assert "http://jaeger.internal:9/trace/<id>" in proc.stdout
        assert "localhost:16686" not in proc.stdout
