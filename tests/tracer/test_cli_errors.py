"""A newcomer's mistakes: each is one line on stderr that says what is wrong and what
hoptrace takes, and exit code 2, never a traceback."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from collector import free_port
from tests.helpers import hoptrace

READS = (
    "hoptrace reads OTLP JSON (one object, or one per line), Jaeger JSON, a trace "
    "downloaded from Tempo, or a span store"
)


def _one_line_error(proc) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("hoptrace: error: ")
    return proc.stderr.strip().removeprefix("hoptrace: error: ")


def test_a_markdown_file_is_called_text_and_the_readable_formats_are_named(tmp_path):
    path = tmp_path / "README.md"
    path.write_text("# hoptrace\n\nSome words.\n")
    assert _one_line_error(hoptrace("analyze", str(path))) == (
        f"no trace could be analysed: {path}: text, not JSON (it starts '# hoptrace'); {READS}"
    )


def test_a_binary_file_is_called_binary_data(tmp_path):
    path = tmp_path / "blob.bin"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00" + os.urandom(500))
    assert _one_line_error(hoptrace("analyze", str(path))) == (
        f"no trace could be analysed: {path}: binary data, not JSON; {READS}"
    )


def test_json_cut_short_is_still_asked_whether_it_is_truncated(tmp_path):
    path = tmp_path / "cut.json"
    path.write_bytes(b'{"data": [')
    message = _one_line_error(hoptrace("analyze", str(path)))
    assert message.startswith(f"no trace could be analysed: {path}: not valid JSON (")
    assert message.endswith("); is it truncated?")


def test_a_url_with_nothing_listening_names_the_jaeger_path_it_asks():
    url = f"http://127.0.0.1:{free_port()}"
    message = _one_line_error(hoptrace("analyze", url))
    assert message == (
        f"nothing answers at {url!r} ([Errno 111] Connection refused); hoptrace asks "
        "Jaeger GET /api/v3/services (UI and query port 16686) and Tempo GET "
        "/api/status/buildinfo (port 3200): is the backend running there?"
    )


def test_collect_into_a_missing_folder_makes_no_folder(tmp_path):
    store = tmp_path / "no-such-folder" / "s.db"
    proc = hoptrace("collect", "--store", str(store), "--port", str(free_port()), timeout=30)
    assert _one_line_error(proc) == (
        f"--store {str(store)!r}: the folder {str(store.parent)!r} does not exist; create "
        "it first or give a path in an existing folder"
    )
    assert not store.parent.exists()


def test_collect_on_a_port_in_use_prints_one_line_and_no_banner(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = hoptrace("collect", "--store", str(tmp_path / "s.db"), "--port", str(port))
    assert _one_line_error(proc) == (
        f"cannot listen on 127.0.0.1:{port} (Address already in use); is another collector "
        "running there? Pick another port with --port, or another --host"
    )
    assert "ERROR" not in proc.stdout + proc.stderr
    assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize("value", ["0", "inf", "-2", "nan"])
def test_serve_speedup_must_be_a_finite_positive_number(value, tmp_path):
    proc = hoptrace("serve", "--speedup", value, "--store", str(tmp_path / "s.db"))
    got = {"0": "0.0", "inf": "inf", "-2": "-2.0", "nan": "nan"}[value]
    assert _one_line_error(proc) == f"--speedup must be a finite number > 0, got {got}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--requests", "0"], "--requests must be a whole number of at least 1, got 0"),
        (["--concurrency", "0"], "--concurrency must be a whole number of at least 1, got 0"),
        (["--warmup", "-1"], "--warmup must be a whole number of at least 0, got -1"),
        (["--speedup", "inf"], "--speedup must be a finite number > 0, got inf"),
        (
            ["--profile", "fast"],
            "--profile: profile must be one of wan, lan, rag, loopback, bare, got 'fast'",
        ),
    ],
)
def test_demo_range_errors_name_the_option(args, message, tmp_path):
    assert _one_line_error(hoptrace("demo", *args, "--store", str(tmp_path / "s.db"))) == message


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--requests", "0"], "--requests must be a whole number of at least 1, got 0"),
        (["--max-tokens", "0"], "--max-tokens must be a whole number of at least 1, got 0"),
        (["--warmup", "-1"], "--warmup must be a whole number of at least 0, got -1"),
        (["--timeout", "0"], "--timeout must be a finite number of seconds > 0, got 0.0"),
        (
            ["--concurrency", "0"],
            "--concurrency levels must be whole numbers of at least 1, got [0]",
        ),
    ],
)
def test_bench_range_errors_name_the_option(args, message):
    url = f"http://127.0.0.1:{free_port()}/v1"
    assert _one_line_error(hoptrace("bench", url, *args)) == message


@pytest.mark.parametrize("command", ["analyze", "runs", "check"])
def test_no_store_yet_names_the_default_store_and_what_fills_it(command, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "HOPTRACE_STORE"}
    env["HOME"] = str(tmp_path)
    extra = ["--budget", str(Path(__file__).parents[2] / "examples/budget-demo.toml")]
    proc = hoptrace(command, *(extra if command == "check" else []), env=env)
    store = tmp_path / ".local/share/hoptrace/spans.db"
    assert _one_line_error(proc) == (
        f"no traces yet: the default store {str(store)!r} does not exist; 'hoptrace demo' or "
        "'hoptrace serve' fills it, 'hoptrace collect' receives your own services' spans "
        "into it, or give a trace file, store or URL"
    )
    assert not store.parent.exists()
