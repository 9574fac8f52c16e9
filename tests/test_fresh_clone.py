"""On a clone of this repository alone (no public trace files beside it, no Chromium),
the tests that need them skip with one line; with CI=true they fail instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Runs pytest itself in child processes: with the integration tests.
pytestmark = pytest.mark.integration
FIXTURE_TEST = "tests/analysis/test_analyze.py::test_hotrod_critical_path_covers_root_exactly"
BROWSER_TEST = "tests/report/test_html.py::test_report_renders_in_headless_chromium"
BACKENDS_TEST = (
    "tests/backends/test_configs.py::test_promtool_checks_the_prometheus_config_compose_mounts"
)


def _pytest(test: str, ci: bool, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["HOPTRACE_FIXTURES"] = str(tmp_path / "no-fixtures-here")
    env["HOPTRACE_CHROMIUM"] = str(tmp_path / "no-chromium-here")
    env["HOPTRACE_BACKENDS"] = str(tmp_path / "no-builds-here")
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", test],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize(
    "test", [FIXTURE_TEST, BROWSER_TEST, BACKENDS_TEST], ids=["fixtures", "chromium", "backends"]
)
def test_missing_fixtures_or_browser_skip_with_one_line_and_fail_in_ci(test, tmp_path):
    local = _pytest(test, ci=False, tmp_path=tmp_path)
    assert local.returncode == 0, local.stdout
    assert "1 skipped" in local.stdout
    reason = [line for line in local.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(reason) == 1
    assert any(w in reason[0] for w in ("HOPTRACE_FIXTURES", "install-browser", "build-backends"))
    ci = _pytest(test, ci=True, tmp_path=tmp_path)
    assert ci.returncode == 1
    assert "CI=true: this test must run" in ci.stdout
