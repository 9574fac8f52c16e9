"""Authentication never turns itself off, and the collector says whether it is on."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import orjson
import pytest

from collector import BackgroundCollector
from tests.collector import bodies
from tests.conftest import CollectorProcess, free_port
from tests.helpers import hoptrace
from tests.hostile.spans import trio
from tracer._errors import ConfigError
from tracer.cli.collect import is_loopback


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_an_empty_token_is_an_error(tmp_path: Path, how: str):
    args = ["collect", "--port", str(free_port()), "--store", str(tmp_path / "s.db")]
    env = {k: v for k, v in os.environ.items() if k != "HOPTRACE_COLLECTOR_TOKEN"}
    if how == "flag":
        args += ["--token", ""]
    else:
        env["HOPTRACE_COLLECTOR_TOKEN"] = ""
    result = hoptrace(*args, env=env, timeout=30)
    assert result.returncode == 2
    assert "token is empty" in result.stderr and "Traceback" not in result.stderr


def test_an_empty_token_is_refused_by_the_receiver_too(tmp_path: Path):
    with pytest.raises(ConfigError, match="token is empty"):
        BackgroundCollector(tmp_path / "s.db", token=" ")


def test_binding_beyond_loopback_without_a_token_warns(tmp_path: Path):
    # 192.0.2.1 (TEST-NET-1) is no address of this machine: the bind fails after the
    # warning, and nothing listens beyond loopback.
    result = hoptrace(
        "collect", "--host", "192.0.2.1", "--port", str(free_port()),
        "--store", str(tmp_path / "s.db"), timeout=30,
    )  # fmt: skip
    assert result.returncode == 2
    assert "hoptrace: error: cannot listen on 192.0.2.1" in result.stderr
    assert "Traceback" not in result.stderr
    assert "warning: --host 192.0.2.1 accepts spans from other machines" in result.stderr
    assert "authentication: off" not in result.stderr  # no banner for a collector never up
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("10.0.0.1")


def test_the_banner_says_auth_is_on_and_healthz_names_no_path(tmp_path: Path):
    store = tmp_path / "secret-place" / "spans.db"
    store.parent.mkdir()
    collector = CollectorProcess(store, "--token", "s3cret")
    try:
        health = httpx.get(collector.endpoint + "/healthz")
        body = orjson.dumps(trio())
        refused = httpx.post(collector.endpoint + "/v1/traces", content=body, headers=bodies.JSON)
        taken = httpx.post(
            collector.endpoint + "/v1/traces",
            content=body,
            headers={**bodies.JSON, "authorization": "Bearer s3cret"},
        )
    finally:
        collector.stop()
    assert health.status_code == 200
    assert "secret-place" not in health.text and str(tmp_path) not in health.text
    assert health.json()["auth"] is True
    assert refused.status_code == 401 and taken.status_code == 200
    banner = collector.proc.stderr.read() if collector.proc.stderr else ""
    assert "authentication: on" in banner
    assert "warning" not in banner
