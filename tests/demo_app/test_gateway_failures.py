"""The gateway under a slow or failing upstream: 504, heartbeats, SSE error events."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from demo_app.chain import Chain
from tests.helpers import eventually
from tracer.analysis import load
from tracer.spans.model import KIND_SERVER

# Boots real service processes on loopback ports: run with -m integration.
pytestmark = pytest.mark.integration

GATEWAY_TIMEOUT_S = 1.5
HEARTBEAT_S = 0.1
# The loopback profile's prefill is 20 ms; the model's speedup divides it.
STALL = 0.005  # prefill 4 s: longer than the gateway's timeout
SLOW = 0.03  # prefill about 670 ms: several heartbeats, inside the timeout


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    store = tmp_path_factory.mktemp("edges") / "spans.db"
    with Chain(
        store,
        profile="loopback",
        gateway_timeout_s=GATEWAY_TIMEOUT_S,
        heartbeat_s=HEARTBEAT_S,
    ) as running:
        yield running


@pytest.fixture
def model(chain):
    """Change the simulated model for one test; restore it afterwards."""
    yield chain.configure_model
    chain.configure_model(speedup=1.0, failure_rate=0.0, midstream_failure_rate=0.0)


def _body(stream: bool, max_tokens: int = 8) -> dict:
    return {
        "model": "sim-1",
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": max_tokens,
        "stream": stream,
    }


def _stream_lines(chain, body: dict) -> tuple[int, list[str]]:
    headers = {"authorization": f"Bearer {chain.api_key}"}
    with httpx.stream(
        "POST", chain.base_url + "/chat/completions", json=body, headers=headers, timeout=30
    ) as resp:
        return resp.status_code, [line for line in resp.iter_lines() if line]


def _events(lines: list[str]) -> list[dict | str]:
    out: list[dict | str] = []
    for line in lines:
        if line.startswith("data: "):
            data = line[6:]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def test_upstream_timeout_answers_504(chain, model):
    model(speedup=STALL)
    started = time.monotonic()
    resp = httpx.post(
        chain.base_url + "/chat/completions",
        json=_body(stream=False),
        headers={"authorization": f"Bearer {chain.api_key}"},
        timeout=30,
    )
    took = time.monotonic() - started
    assert resp.status_code == 504
    assert "timed out" in resp.json()["error"]["message"]
    # The gateway's timeout, not the client's 30 s: late on a busy machine, never 30 s.
    assert GATEWAY_TIMEOUT_S <= took < GATEWAY_TIMEOUT_S + 10.0
    # The 504 is on the gateway's server span in the store.
    codes = eventually(
        lambda: {
            s.attributes.get("http.response.status_code", s.attributes.get("http.status_code"))
            for spans in load([chain.collector.store.path]).traces.values()
            for s in spans
            if s.service == "gateway" and s.kind == KIND_SERVER
        },
        lambda found: 504 in found,
    )
    assert 504 in codes


def test_long_wait_sends_heartbeats_then_the_answer(chain, model):
    model(speedup=SLOW)
    status, lines = _stream_lines(chain, _body(stream=True))
    assert status == 200
    first_data = next(i for i, line in enumerate(lines) if line.startswith("data: "))
    heartbeats = [line for line in lines[:first_data] if line == ": keep-alive"]
    # About 670 ms of prefill at one heartbeat per 100 ms.
    assert len(heartbeats) >= 3
    events = _events(lines)
    assert events[-1] == "[DONE]"
    text = "".join(
        e["choices"][0]["delta"].get("content", "") for e in events if isinstance(e, dict)
    )
    assert len(text.split()) == 8


def test_stalled_stream_ends_with_an_sse_error_event(chain, model):
    model(speedup=STALL)
    status, lines = _stream_lines(chain, _body(stream=True))
    # The headers were already sent: the failure arrives as an event, not a cut.
    assert status == 200
    assert ": keep-alive" in lines
    events = _events(lines)
    assert len(events) == 1 and isinstance(events[0], dict)
    assert events[0]["error"]["type"] == "upstream_error"
    assert "ReadTimeout" in events[0]["error"]["message"]


def test_model_failing_mid_stream_becomes_an_sse_error_event(chain, model):
    model(midstream_failure_rate=1.0)
    status, lines = _stream_lines(chain, _body(stream=True, max_tokens=8))
    assert status == 200
    events = _events(lines)
    content = [e for e in events if isinstance(e, dict) and "choices" in e]
    errors = [e for e in events if isinstance(e, dict) and "error" in e]
    # Half the answer came out, then one error event; no [DONE], no mixed answer.
    assert len(content) == 4
    assert len(errors) == 1 and events[-1] is errors[0]
    assert "mid-stream" in errors[0]["error"]["message"]
    assert "[DONE]" not in events
