"""Shared fixtures: the public trace files, a hoptrace collector process, span capture."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers import skip_or_fail

REPO = Path(__file__).resolve().parents[1]
# Every tracer in the tests, and the services they start, export within 100 ms.
os.environ.setdefault("OTEL_BSP_SCHEDULE_DELAY", "100")
FIXTURES = Path(os.environ.get("HOPTRACE_FIXTURES", REPO.parent / "shared" / "fixtures"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With ``-n`` and ``--dist loadgroup`` (``scripts/check``), the integration tests
    (the demo chain, the load tests, the browser) run one after another on one worker,
    as they did alone, while the other workers take the unit tests."""
    for item in items:
        if item.get_closest_marker("integration") is not None:
            item.add_marker(pytest.mark.xdist_group("integration"))


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """The folder of public trace files (../shared/fixtures, or $HOPTRACE_FIXTURES)."""
    if not FIXTURES.is_dir():
        skip_or_fail(
            f"public trace fixtures not found at {FIXTURES}: put the project's shared/fixtures "
            "folder beside the checkout or set HOPTRACE_FIXTURES"
        )
    return FIXTURES


def free_port() -> int:
    from collector import free_port as fp

    return fp()


def wait_http(url: str, deadline_s: float = 20.0, proc: subprocess.Popen | None = None) -> None:
    """Poll ``url`` until it answers, with a deadline."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(
                f"process exited with {proc.returncode}: "
                f"{proc.stderr.read() if proc.stderr else ''}"
            )
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.HTTPError:
            time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer within {deadline_s}s")


class CollectorProcess:
    """A real ``hoptrace collect`` process on a free loopback port."""

    def __init__(self, store: Path, *extra: str):
        self.store = store
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tracer.cli",
                "collect",
                "--port",
                str(self.port),
                "--store",
                str(store),
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_http(self.endpoint + "/healthz", proc=self.proc)

    def health(self) -> dict:
        return httpx.get(self.endpoint + "/healthz").json()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture
def collector_process(tmp_path: Path) -> Iterator[CollectorProcess]:
    proc = CollectorProcess(tmp_path / "spans.db", "--max-body-bytes", "200000")
    try:
        yield proc
    finally:
        proc.stop()
