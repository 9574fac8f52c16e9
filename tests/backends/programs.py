"""The real backends as processes on loopback ports: Jaeger v2, the OpenTelemetry
Collector and Prometheus, built by ``scripts/build-backends`` (docs/backends.md).

Each runs from the project's own configuration files, its addresses given by the
environment those files read; a test that needs a program that is not built skips
with one line, or fails in CI (``CI=true``).
"""

from __future__ import annotations

import functools
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from collector import free_port
from tests.helpers import skip_or_fail

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "scripts" / "build-backends"
JAEGER_CONFIG = REPO / "backends" / "jaeger" / "config.yaml"
OTELCOL_CONFIG = REPO / "collector" / "otelcol-config.yaml"
PROMETHEUS_CONFIG = REPO / "collector" / "prometheus.yml"


@functools.cache
def _folders() -> dict[str, Path]:
    """Where ``scripts/build-backends`` puts each program (built or not)."""
    out = subprocess.run(
        ["bash", str(BUILD), "--where"], capture_output=True, text=True, check=True
    ).stdout
    return {
        name: Path(folder)
        for name, _, folder in (line.partition("=") for line in out.splitlines())
        if folder
    }


def program(name: str, binary: str | None = None) -> Path:
    """The path of a built program (``binary`` within the ``name`` build); skips the
    test (fails it in CI) when it is not built."""
    folder = _folders().get(name, Path("/nonexistent"))
    path = folder / (binary or name)
    if not (folder / ".built").exists() or not path.exists():
        skip_or_fail(f"{binary or name} is not built: run scripts/build-backends (needs Go)")
    return path


def wait_until(probe: Callable[[], bool], what: str, proc: Process, deadline_s: float = 60) -> None:
    """Poll ``probe`` until it is true; fail with ``what`` and the process's log at the
    deadline or when the process exits first."""
    end = time.monotonic() + deadline_s
    while True:
        if proc.popen.poll() is not None:
            raise AssertionError(f"{proc.name} exited with {proc.popen.returncode}:\n{proc.log()}")
        try:
            if probe():
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > end:
            raise AssertionError(f"{what} within {deadline_s} s; {proc.name} said:\n{proc.log()}")
        time.sleep(0.1)


@dataclass
class Process:
    """A running program; its output goes to ``log_path``."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    urls: dict[str, str] = field(default_factory=dict)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


@contextmanager
def running(name: str, argv: list[str], env: dict[str, str], folder: Path) -> Iterator[Process]:
    """Start ``argv`` with ``env`` added to this environment; stopped at the end."""
    folder.mkdir(parents=True, exist_ok=True)
    log_path = folder / f"{name}.log"
    with open(log_path, "wb") as log:
        popen = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env}, cwd=folder
        )
    proc = Process(name, popen, log_path)
    try:
        yield proc
    finally:
        proc.stop()


def loopback() -> str:
    """A free ``127.0.0.1:PORT``."""
    return f"127.0.0.1:{free_port()}"


@contextmanager
def jaeger(folder: Path) -> Iterator[Process]:
    """Jaeger v2 with ``backends/jaeger/config.yaml``: ``urls`` has ``query`` (the UI
    and APIs), ``otlp_grpc`` (host:port) and ``otlp_http``."""
    query, grpc, otlp_grpc, otlp_http = (loopback() for _ in range(4))
    env = {
        "HOPTRACE_JAEGER_QUERY_HTTP": query,
        "HOPTRACE_JAEGER_QUERY_GRPC": grpc,
        "HOPTRACE_JAEGER_OTLP_GRPC": otlp_grpc,
        "HOPTRACE_JAEGER_OTLP_HTTP": otlp_http,
    }
    argv = [str(program("jaeger")), "--config", f"file:{JAEGER_CONFIG}"]
    with running("jaeger", argv, env, folder) as proc:
        proc.urls = {
            "query": f"http://{query}",
            "otlp_grpc": otlp_grpc,
            "otlp_http": f"http://{otlp_http}",
        }
        wait_until(
            lambda: httpx.get(f"http://{query}/api/v3/services", timeout=2).status_code == 200,
            "Jaeger's query service did not answer",
            proc,
        )
        yield proc


def otelcol_env(jaeger_grpc: str, collect_url: str, file_path: Path) -> dict[str, str]:
    """The environment ``collector/otelcol-config.yaml`` reads, for loopback ports."""
    return {
        "HOPTRACE_OTELCOL_GRPC": loopback(),
        "HOPTRACE_OTELCOL_HTTP": loopback(),
        "HOPTRACE_OTELCOL_HEALTH": loopback(),
        "HOPTRACE_JAEGER_OTLP": jaeger_grpc,
        "HOPTRACE_OTELCOL_FILE": str(file_path),
        "HOPTRACE_COLLECT_URL": collect_url,
    }


@contextmanager
def otelcol(folder: Path, env: dict[str, str], *extra: str) -> Iterator[Process]:
    """The Collector with ``collector/otelcol-config.yaml`` itself (``extra`` adds
    ``--config``/``--set`` arguments), its own telemetry off: ``urls`` has ``http``
    (the OTLP/HTTP receiver) and ``health``."""
    argv = [
        str(program("otelcol")),
        "--config",
        f"file:{OTELCOL_CONFIG}",
        *extra,
        "--set",
        "service.telemetry.metrics.level=none",
    ]
    with running("otelcol", argv, env, folder) as proc:
        proc.urls = {
            "http": f"http://{env['HOPTRACE_OTELCOL_HTTP']}",
            "health": f"http://{env['HOPTRACE_OTELCOL_HEALTH']}",
        }
        wait_until(
            lambda: httpx.get(proc.urls["health"], timeout=2).status_code == 200,
            "the Collector's health check did not answer 200",
            proc,
        )
        yield proc


def prometheus_config(target: str) -> str:
    """``collector/prometheus.yml`` with its scrape target (a compose service name)
    replaced by ``target``: the one change a run without Docker needs."""
    text = PROMETHEUS_CONFIG.read_text()
    assert text.count('"hoptrace-collector:4320"') == 1
    return text.replace('"hoptrace-collector:4320"', f'"{target}"')


@contextmanager
def prometheus(folder: Path, config_text: str) -> Iterator[Process]:
    """Prometheus with ``config_text``: ``urls`` has ``api`` (its base URL)."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "prometheus.yml"
    config.write_text(config_text)
    listen = loopback()
    argv = [
        str(program("prometheus")),
        f"--config.file={config}",
        f"--web.listen-address={listen}",
        f"--storage.tsdb.path={folder / 'tsdb'}",
    ]
    with running("prometheus", argv, {}, folder) as proc:
        proc.urls = {"api": f"http://{listen}"}
        wait_until(
            lambda: httpx.get(f"http://{listen}/-/ready", timeout=2).status_code == 200,
            "Prometheus was not ready",
            proc,
        )
        yield proc
