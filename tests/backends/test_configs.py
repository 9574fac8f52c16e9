"""Every configuration file docker-compose mounts is read by the real program that reads
it: the Collector's ``validate``, ``promtool check config`` (no Docker engine here)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.backends.programs import JAEGER_CONFIG, OTELCOL_CONFIG, REPO, otelcol_env, program

SPANMETRICS = REPO / "collector" / "otelcol-spanmetrics.yaml"

pytestmark = [pytest.mark.integration, pytest.mark.backends]


def _run(*argv: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [str(a) for a in argv],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def _mounted(service: str, container_path: str) -> Path:
    """The host file that docker-compose mounts at ``container_path`` of ``service``."""
    services = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    for volume in services[service]["volumes"]:
        host, container = volume.split(":")[:2]
        if container == container_path:
            return REPO / host
    raise AssertionError(f"{service} mounts nothing at {container_path}")


def test_the_collector_validates_the_config_compose_mounts_as_compose_runs_it():
    config = _mounted("otel-collector", "/etc/otelcol-contrib/config.yaml")
    assert config == OTELCOL_CONFIG
    done = _run(program("otelcol"), "validate", "--config", f"file:{config}")
    assert done.returncode == 0, done.stderr


def test_the_collector_validates_the_config_with_loopback_addresses(tmp_path):
    env = otelcol_env("127.0.0.1:1", "http://127.0.0.1:2", tmp_path / "traces.jsonl")
    done = _run(program("otelcol"), "validate", "--config", f"file:{OTELCOL_CONFIG}", env=env)
    assert done.returncode == 0, done.stderr


def test_the_collector_refuses_a_pipeline_naming_an_exporter_it_lacks(tmp_path):
    # validate is not a rubber stamp: the same file with one exporter renamed fails.
    text = OTELCOL_CONFIG.read_text()
    broken = tmp_path / "broken.yaml"
    broken.write_text(text.replace("[otlp/jaeger, file,", "[otlp/jaegr, file,"))
    done = _run(program("otelcol"), "validate", "--config", f"file:{broken}")
    assert done.returncode != 0
    assert "otlp/jaegr" in done.stderr


def test_the_spanmetrics_file_adds_the_connector_to_the_same_pipeline(tmp_path):
    base = yaml.safe_load(OTELCOL_CONFIG.read_text())["service"]["pipelines"]["traces"]
    extra = yaml.safe_load(SPANMETRICS.read_text())["service"]["pipelines"]["traces"]
    assert extra["exporters"] == [*base["exporters"], "spanmetrics"]
    argv = ("--config", f"file:{OTELCOL_CONFIG}", "--config", f"file:{SPANMETRICS}")
    done = _run(program("otelcol"), "validate", *argv)
    assert done.returncode == 0, done.stderr


def test_promtool_checks_the_prometheus_config_compose_mounts():
    config = _mounted("prometheus", "/etc/prometheus/prometheus.yml")
    done = _run(program("prometheus", "promtool"), "check", "config", config)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_jaeger_validates_the_config_of_the_run_without_docker():
    done = _run(program("jaeger"), "validate", "--config", f"file:{JAEGER_CONFIG}")
    assert done.returncode == 0, done.stderr
