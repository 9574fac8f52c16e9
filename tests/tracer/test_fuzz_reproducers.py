"""Every line that fuzzing found to crash or mislead a decoder ends the same way with the
compiled parts on and off: the same exit status, no signal, no traceback, the same JSON.

The reproducers are the project's shared ``fuzz_repro`` folder (beside the checkout, or
``$HOPTRACE_FUZZ_REPRO``) and the harness's own findings in ``fuzz/crashes/``, each run
as a user runs it: ``hoptrace analyze FILE --format json --price '*=1:1'``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.helpers import skip_or_fail

SHARED = Path(os.environ.get("HOPTRACE_FUZZ_REPRO", REPO.parent / "shared" / "fuzz_repro"))
OWN = REPO / "fuzz" / "crashes"


def _files() -> list[Path]:
    found = sorted(SHARED.glob("*.jsonl")) if SHARED.is_dir() else []
    return found + sorted(p for p in OWN.glob("*") if p.is_file() and p.name != "README.md")


def _analyze(path: Path, native: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOPTRACE_NATIVE": native, "HOPTRACE_WORKERS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "tracer.cli", "analyze", str(path), "--format", "json"]
        + ["--price", "*=1:1"],
        capture_output=True,
        env=env,
        timeout=120,
    )


def test_the_shared_reproducers_are_here():
    if not SHARED.is_dir():
        skip_or_fail(
            f"fuzzing reproducers not found at {SHARED}: put the project's shared/fuzz_repro "
            "folder beside the checkout or set HOPTRACE_FUZZ_REPRO"
        )
    assert len(list(SHARED.glob("*.jsonl"))) >= 10


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.name)
def test_a_reproducer_ends_the_same_way_with_the_compiled_parts_on_and_off(path):
    on, off = _analyze(path, "on"), _analyze(path, "off")
    for run in (on, off):
        assert run.returncode >= 0, f"killed by signal {-run.returncode}"
        assert b"Traceback" not in run.stderr, run.stderr.decode(errors="replace")[-2000:]
        assert run.returncode in (0, 2), run.stderr.decode(errors="replace")[-500:]
    assert on.returncode == off.returncode
    assert on.stdout == off.stdout
    if on.returncode:  # refused: one line that says why
        assert len(on.stderr.decode().strip().splitlines()) == 1
