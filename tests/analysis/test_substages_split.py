"""Sub-stages in every output and ``--split-by`` on analyze, whatif, report and check."""

from __future__ import annotations

import re

import orjson
import pytest

from tests.helpers import hoptrace
from tests.synthetic import MS, SEED_MS, chain_trace, to_otlp_json
from tracer.analysis.render.svg import STAGE_COLOURS, stage_colour

T0 = 1_700_000_000_000_000_000
QUEUE, PREFILL, DECODE = 20.0, 180.0, 700.0  # of the 1000 ms of inference


@pytest.fixture(scope="module")
def engine_file(tmp_path_factory):
    """12 seed-chain traces whose model span reports queue/prefill/decode like vLLM;
    models alternate: 8 llama, 4 mistral (the mistral ones 200 ms slower in decode)."""
    path = tmp_path_factory.mktemp("engine") / "engine.jsonl"
    lines = []
    for i in range(12):
        slow = i % 3 == 0
        decode = DECODE + (200.0 if slow else 0.0)
        ms = {**SEED_MS, "inference": QUEUE + PREFILL + decode + 100.0}
        spans = chain_trace(
            f"{i + 1:032x}",
            T0 + i * 5000 * MS,
            ms,
            model="mistral-7b" if slow else "llama-3-8b",
            engine_ms=(QUEUE, PREFILL, decode),
        )
        lines.append(orjson.dumps(to_otlp_json(spans)))
    path.write_bytes(b"\n".join(lines))
    return path


def _json(*args: str) -> dict:
    done = hoptrace(*args, "--format", "json")
    assert done.returncode == 0, done.stderr
    return orjson.loads(done.stdout)


def test_analyze_json_has_sub_stage_groups_whose_shares_sum_to_one(engine_file):
    out = _json("analyze", str(engine_file))
    groups = {g["name"]: g for g in out["groups"]}
    assert groups["inference.queue"]["mean_ms"] == pytest.approx(QUEUE, abs=1e-3)
    assert groups["inference.prefill"]["mean_ms"] == pytest.approx(PREFILL, abs=1e-3)
    assert groups["inference.decode"]["mean_ms"] == pytest.approx(DECODE + 200 / 3, abs=1e-3)
    # The rest of the model span (100 ms; its network legs are 0 in this profile).
    assert groups["inference"]["mean_ms"] == pytest.approx(100.0, abs=1e-3)
    assert sum(g["share"] for g in out["groups"]) == pytest.approx(1.0)


def test_table_and_markdown_show_sub_stages_under_their_parent(engine_file):
    for fmt in ("table", "markdown"):
        done = hoptrace("analyze", str(engine_file), "--format", fmt)
        assert done.returncode == 0, done.stderr
        rows = [line.replace("│", "|") for line in done.stdout.splitlines()]
        lines = [line for line in rows if line.startswith("|") and "inference" in line]
        order = [n for line in lines for n in ("inference.queue", "inference.prefill",
                 "inference.decode") if n in line]  # fmt: skip
        # The parent's row is its own time; the note says what the family holds.
        assert lines[0].split("|")[1].strip() == "inference (own time)"
        assert "inference with its sub-stages (what --stage inference selects)" in done.stdout
        assert sorted(order) == sorted(["inference.queue", "inference.prefill", "inference.decode"])
        assert all("↳ inference." in line for line in lines[1:4])


def test_sub_stage_colours_are_shades_of_the_parent_colour():
    parent = STAGE_COLOURS["inference"]
    shades = [stage_colour(f"inference.{s}") for s in ("queue", "prefill", "decode")]
    assert len(set(shades)) == 3 and parent not in shades
    red = int(parent[1:3], 16)
    # queue and prefill lighter than the parent, decode darker; hue kept (red dominant).
    assert int(shades[0][1:3], 16) > int(shades[1][1:3], 16) > red > int(shades[2][1:3], 16)
    assert all(int(c[1:3], 16) >= int(c[5:7], 16) for c in shades)


def test_whatif_decode_next_to_prefill_and_inference_covering_both(engine_file):
    def after_p50(stage: str) -> float:
        return _json("whatif", str(engine_file), "--stage", stage, "--speedup", "10")["after_ms"][
            "p50"
        ]

    before = _json("whatif", str(engine_file), "--stage", "inference", "--speedup", "1")
    e2e = before["before_ms"]["p50"]
    decode_gain = after_p50("inference.decode")
    prefill_gain = after_p50("inference.prefill")
    whole = after_p50("inference")
    # The median trace is a llama one (decode 700): e' = e - a * (1 - 1/k).
    assert prefill_gain == pytest.approx(e2e - PREFILL * 0.9, abs=1e-3)
    assert decode_gain == pytest.approx(e2e - DECODE * 0.9, abs=1e-3)
    inference_total = QUEUE + PREFILL + DECODE + 100.0
    assert whole == pytest.approx(e2e - inference_total * 0.9, abs=1e-3)


def test_budget_on_inference_covers_its_sub_stages_and_a_sub_stage_alone(engine_file, tmp_path):
    budget = tmp_path / "b.toml"
    budget.write_text(
        '[stage.inference]\np50_ms = 10000\n[stage."inference.decode"]\np90_ms = 800\n'
    )
    done = hoptrace("check", str(engine_file), "--budget", str(budget), "--format", "json")
    checks = {c["scope"]: c for c in orjson.loads(done.stdout)["checks"]}
    inference_total = QUEUE + PREFILL + DECODE + 100.0
    assert checks["stage.inference"]["measured"] == pytest.approx(inference_total, abs=1e-3)
    assert checks["stage.inference.decode"]["measured"] == pytest.approx(DECODE + 200, abs=1e-3)
    assert done.returncode == 1  # the decode P90 (900 ms, mistral) is over 800


def test_analyze_split_by_model_gives_each_model_its_breakdown(engine_file):
    out = _json("analyze", str(engine_file), "--split-by", "gen_ai.request.model")
    assert out["split_by"] == "gen_ai.request.model"
    parts = {p["value"]: p for p in out["splits"]}
    assert {v: p["traces"] for v, p in parts.items()} == {"llama-3-8b": 8, "mistral-7b": 4}
    decode = {
        v: next(g for g in p["analysis"]["groups"] if g["name"] == "inference.decode")["mean_ms"]
        for v, p in parts.items()
    }
    assert decode == {
        "llama-3-8b": pytest.approx(DECODE),
        "mistral-7b": pytest.approx(DECODE + 200),
    }
    table = hoptrace("analyze", str(engine_file), "--split-by", "gen_ai.request.model")
    assert "llama-3-8b (8)" in table.stdout and "mistral-7b (4)" in table.stdout


def test_whatif_and_check_split_by_model(engine_file, tmp_path):
    out = _json("whatif", str(engine_file), "--stage", "inference.decode", "--speedup", "10",
                "--split-by", "gen_ai.request.model")  # fmt: skip
    after = {p["value"]: p["whatif"]["after_ms"]["p50"] for p in out["splits"]}
    before = {p["value"]: p["whatif"]["before_ms"]["p50"] for p in out["splits"]}
    assert after["mistral-7b"] == pytest.approx(before["mistral-7b"] - (DECODE + 200) * 0.9)
    assert after["llama-3-8b"] == pytest.approx(before["llama-3-8b"] - DECODE * 0.9)
    budget = tmp_path / "b.toml"
    budget.write_text('[stage."inference.decode"]\np90_ms = 800\n')
    done = hoptrace("check", str(engine_file), "--budget", str(budget),
                    "--split-by", "gen_ai.request.model")  # fmt: skip
    assert done.returncode == 1
    llama, mistral = done.stdout.split("\n\n")
    assert llama.startswith("[gen_ai.request.model = llama-3-8b]") and "PASS" in llama
    assert mistral.startswith("[gen_ai.request.model = mistral-7b]") and "FAIL" in mistral


def test_report_split_by_draws_one_bar_per_value(engine_file, tmp_path):
    page = tmp_path / "r.html"
    done = hoptrace(
        "report", str(engine_file), "-o", str(page), "--split-by", "gen_ai.request.model"
    )
    assert done.returncode == 0, done.stderr
    html = page.read_text()
    assert 'id="split-bars"' in html and 'id="split-table"' in html
    assert "mistral-7b (4)" in html
    assert f'fill="{stage_colour("inference.decode")}"' in html


def test_split_by_an_attribute_no_trace_has_is_one_line_and_exit_2(engine_file):
    done = hoptrace("analyze", str(engine_file), "--split-by", "no.such.key")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no.such.key" in done.stderr
    assert "Traceback" not in done.stderr


def test_check_split_by_marks_a_stage_one_value_never_reaches_as_not_applicable(tmp_path):
    # Two models; only llama traces report the engine's phases.
    path = tmp_path / "mixed.jsonl"
    lines = []
    for i in range(12):
        llama = i % 2 == 0
        spans = chain_trace(
            f"{i + 1:032x}", T0 + i * 5000 * MS, SEED_MS,
            model="llama-3-8b" if llama else "mistral-7b",
            engine_ms=(QUEUE, PREFILL, DECODE) if llama else None,
        )  # fmt: skip
        lines.append(orjson.dumps(to_otlp_json(spans)))
    path.write_bytes(b"\n".join(lines))
    budget = tmp_path / "b.toml"
    budget.write_text('[stage."inference.decode"]\np90_ms = 10000\n')
    done = hoptrace("check", str(path), "--budget", str(budget), "--split-by",
                    "gen_ai.request.model", "--format", "json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    parts = {p["value"]: p for p in orjson.loads(done.stdout)["splits"]}
    assert parts["mistral-7b"]["checks"][0]["measured"] is None
    assert parts["llama-3-8b"]["checks"][0]["measured"] == pytest.approx(DECODE, abs=1e-3)
    text = hoptrace("check", str(path), "--budget", str(budget), "--split-by",
                    "gen_ai.request.model")  # fmt: skip
    assert "n/a" in text.stdout and text.returncode == 0


@pytest.mark.parametrize("args", [["--speedup", "0", "--stage", "inference"],
                                  ["--speedup", "10", "--stage", "nosuch"]])  # fmt: skip
def test_whatif_split_by_refuses_a_mistake_that_applies_to_every_value(engine_file, args):
    done = hoptrace("whatif", str(engine_file), *args, "--split-by", "gen_ai.request.model")
    assert done.returncode == 2 and done.stderr.count("\n") == 1


def test_an_output_file_that_cannot_be_written_is_one_line(engine_file, tmp_path):
    done = hoptrace("analyze", str(engine_file), "-o", str(tmp_path / "missing" / "x.txt"))
    assert done.returncode == 2
    assert "cannot write" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("speedup", ["1e-300", "nan", "0.0001"])
def test_whatif_refuses_a_speedup_that_would_overflow_or_mean_nothing(engine_file, speedup):
    done = hoptrace("whatif", str(engine_file), "--stage", "inference", "--speedup", speedup)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "speedup must be" in done.stderr and "Traceback" not in done.stderr
    slower = hoptrace("whatif", str(engine_file), "--stage", "inference", "--speedup", "0.5")
    assert slower.returncode == 0
    assert re.search(r"\b(inf|nan)\b", slower.stdout.lower()) is None
