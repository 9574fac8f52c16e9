"""Every option of every command says what it does, and one --format vocabulary."""

from __future__ import annotations

import click
import orjson
import pytest
from click.testing import CliRunner

from demo_app.profiles import ALIASES, PROFILES
from tests.helpers import hoptrace
from tests.synthetic import chain_trace, to_otlp_json
from tracer.cli import main

FORMATS = {"table", "json", "markdown", "html"}


def _commands(group: click.Group = main, path: str = "hoptrace"):
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from _commands(command, f"{path} {name}")
        else:
            yield f"{path} {name}", command


def test_every_option_of_every_command_has_help():
    missing = [
        f"{path} {'/'.join(p.opts)}"
        for path, command in _commands()
        for p in command.params
        if isinstance(p, click.Option) and not p.hidden and not (p.help or "").strip()
    ]
    assert missing == []


def test_the_walk_sees_every_command():
    names = {path.split()[-1] for path, _ in _commands()}
    assert {"analyze", "whatif", "compare", "report", "check", "runs", "collect"} <= names
    assert {"bench", "demo", "serve"} <= names


def test_every_format_option_speaks_one_vocabulary():
    for path, command in _commands():
        for p in command.params:
            if isinstance(p, click.Option) and "--format" in p.opts:
                shown = p.make_metavar(click.Context(command)).strip("[]").split("|")
                assert set(shown) <= FORMATS, (path, shown)
                assert "table" in shown, path


def test_check_takes_table_and_still_takes_text(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(orjson.dumps(to_otlp_json(chain_trace("1" * 32, 1_700_000_000 * 10**9))))
    budget = tmp_path / "b.toml"
    budget.write_text("[e2e]\np50_ms = 10000\n")
    table = hoptrace("check", str(path), "--budget", str(budget), "--format", "table")
    text = hoptrace("check", str(path), "--budget", str(budget), "--format", "text")
    assert table.returncode == text.returncode == 0, table.stderr
    assert table.stdout == text.stdout and "PASS" in table.stdout
    bad = hoptrace("check", str(path), "--budget", str(budget), "--format", "yaml")
    assert bad.returncode == 2
    assert bad.stderr == "hoptrace: error: --format must be table or json, got 'yaml'\n"


def test_top_level_help_has_examples():
    out = CliRunner().invoke(main, ["--help"]).output
    assert "Examples:" in out
    assert "hoptrace demo" in out and "hoptrace analyze --run '*:baseline'" in out


@pytest.mark.parametrize("command", ["demo", "serve"])
def test_profile_help_lists_every_profile_and_not_the_old_name(command):
    out = CliRunner().invoke(main, [command, "--help"], terminal_width=200).output
    flat = " ".join(out.split())
    for name in PROFILES:
        assert name in flat
    for old in ALIASES:
        assert old not in flat
    assert "[default: wan]" in flat


def test_report_price_adds_the_cost_per_request(tmp_path):
    path = tmp_path / "t.jsonl"
    spans = chain_trace("2" * 32, 1_700_000_000 * 10**9, tokens=(1000, 500), model="m")
    path.write_bytes(orjson.dumps(to_otlp_json(spans)))
    out = tmp_path / "r.html"
    done = hoptrace("report", str(path), "-o", str(out), "--price", "m=1:2")
    assert done.returncode == 0, done.stderr
    # 1,000 input tokens at 1 and 500 output at 2 per 1,000: 2.0 per request.
    assert "cost: 2.000000 per request" in out.read_text()


def test_compare_price_gives_each_sides_cost_per_request(tmp_path):
    base, cand = tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    t0 = 1_700_000_000 * 10**9
    base.write_bytes(orjson.dumps(to_otlp_json(chain_trace("3" * 32, t0, tokens=(1000, 500)))))
    cand.write_bytes(orjson.dumps(to_otlp_json(chain_trace("4" * 32, t0, tokens=(1000, 250)))))
    done = hoptrace("compare", str(base), str(cand), "--price", "*=1:2")
    assert done.returncode == 0, done.stderr
    # 1,000 in at 1 and 500 (then 250) out at 2 per 1,000 tokens.
    assert "cost per request: 2.000000 -> 1.500000" in done.stdout
    assert "cost per request" not in hoptrace("compare", str(base), str(cand)).stdout
