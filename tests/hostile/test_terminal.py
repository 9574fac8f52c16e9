"""Names from traces and text from servers reach the terminal as text: rich markup and
control characters are shown, never obeyed, in every text output and error line."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.helpers import hoptrace
from tests.hostile.spans import T0, batch, span
from tracer._terminal import for_rich, printable
from tracer.analysis.render.sections import Section
from tracer.analysis.render.text import to_markdown, to_table

MS = 1_000_000
OSC8 = "\x1b]8;;http://example.invalid/\x1b\\click\x1b]8;;\x1b\\"
NAMES = ["GET /users/[id]", "[/]", "[bold red]loud", OSC8, "nul\x00byte", "back\rspace\u202e"]


def _unsafe(text: str) -> bool:
    return any(ch in text for ch in ("\x1b", "\x00", "\r", "\u202e"))


def test_a_section_with_markup_and_control_characters_renders_them_as_text():
    section = Section(
        "by [/]", ["group", "ms"], [[name, "1.0"] for name in NAMES], ["note [/]\x1b"]
    )
    table = to_table([section], width=120)
    for shown in ("GET /users/[id]", "[/]", "[bold red]loud", "\\x1b]8;;", "nul\\x00byte"):
        assert shown in table
    assert not _unsafe(table)
    markdown = to_markdown([section])
    assert "GET /users/[id]" in markdown and not _unsafe(markdown)


def test_printable_writes_each_control_character_as_an_escape():
    assert printable("a\x1b[31mb\x00c\x9bd\u202ee\n") == "a\\x1b[31mb\\x00c\\x9bd\\u202ee\n"
    assert printable("line\nbreak\t", one_line=True) == "line\\x0abreak\\x09"
    assert for_rich("[/]") == "\\[/]"


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_analyze_prints_names_with_markup_and_control_characters_as_text(tmp_path: Path, fmt: str):
    root = span("1" * 16, name="[/]", start=T0, end=T0 + 60 * MS)
    children = [
        span(
            f"{i + 2:016x}", "1" * 16, name=name, start=T0 + i * 10 * MS, end=T0 + (i + 1) * 10 * MS
        )
        for i, name in enumerate(NAMES)
    ]  # one after another, so that each is on the critical path
    path = tmp_path / "names.json"
    path.write_bytes(orjson.dumps(batch([root, *children], service="svc[/]\x1b[31m")) + b"\n")
    result = hoptrace("analyze", str(path), "--group-by", "operation", "--format", fmt)
    assert result.returncode == 0, result.stderr
    assert "GET /users/[id]" in result.stdout and "[bold red]loud" in result.stdout
    assert "svc[/]\\x1b[31m" in result.stdout
    assert not _unsafe(result.stdout)


def test_an_error_line_shows_control_characters_as_escapes(tmp_path: Path):
    stage = {"key": "hoptrace.stage", "value": {"stringValue": "red\x1b[31m\x07"}}
    path = tmp_path / "stage.json"
    path.write_bytes(orjson.dumps(batch([span("1" * 16, None, [stage])])) + b"\n")
    result = hoptrace("whatif", str(path), "--stage", "inference", "--speedup", "2")
    assert result.returncode == 2
    assert "red\\x1b[31m\\x07" in result.stderr
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr


def test_a_trace_id_that_is_not_hex_is_percent_encoded_in_the_jaeger_link():
    from tracer.analysis.render.links import trace_url

    odd = "../../api/x?y=1#zzzzzzzzzzzzzzzzz"[:32]
    url = trace_url("http://jaeger:16686/", odd)
    assert url == "http://jaeger:16686/trace/..%2F..%2Fapi%2Fx%3Fy%3D1%23" + "z" * 16
    assert url.count("/") == 4  # one path segment for the id
    assert trace_url("http://j", "ab" * 16) == "http://j/trace/" + "ab" * 16


def test_check_prints_split_values_with_control_characters_as_text(tmp_path: Path):
    tag = {"key": "tier", "value": {"stringValue": "gold\x1b]8;;x\x07"}}
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps(batch([span("1" * 16, None, [tag])])) + b"\n")
    budget = tmp_path / "budget.toml"
    budget.write_text("[e2e]\np90_ms = 1000\n")
    result = hoptrace("check", str(path), "--budget", str(budget), "--split-by", "tier")
    assert result.returncode == 0, result.stderr
    assert "gold\\x1b]8;;x\\x07" in result.stdout and "\x1b" not in result.stdout
