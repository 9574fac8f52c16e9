"""The demo chain for real: four services and the collector on loopback ports."""

from __future__ import annotations

import json
import time
from collections import Counter

import httpx
import pytest

import tracer
from demo_app.chain import Chain
from demo_app.client import run_requests
from tests.helpers import eventually, fresh_tracer_provider
from tracer.analysis import analyze, load
from tracer.analysis.model.prepare import prepare
from tracer.spans import Warnings

# Boots real service processes on loopback ports: run with -m integration.
pytestmark = pytest.mark.integration

STAGES = {"client", "gateway", "auth", "context", "inference", "postprocess", "return"}
SERVICES = {"client", "gateway", "app", "model"}


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo")
    with Chain(folder / "spans.db", profile="lan", rate_limit=0.0, log_dir=folder) as running:
        fresh_tracer_provider()  # not one an earlier test in this process installed
        tracer.setup(service_name="client", endpoint=running.collector.endpoint)
        yield running
        # Flush and stop the exporter while the collector still listens.
        tracer.shutdown()


def _complete(chain, ids, deadline_s=20.0):
    """The store's traces and those of ``ids``, once every one has all seven stages."""

    def probe():
        tracer.force_flush()
        traces = load([chain.collector.store.path])
        return traces, {t: s for t, s in traces.traces.items() if t in ids}

    def done(result):
        # Every stage, and every service: each exports on its own timer, and the app's
        # spans alone already hold every stage.
        have = result[1]
        return len(have) == len(ids) and all(
            {s.stage for s in spans} >= STAGES and {s.service for s in spans} >= SERVICES
            for spans in have.values()
        )

    return eventually(probe, done, deadline_s)


@pytest.mark.parametrize("stream", [True, False])
def test_chain_traces_are_complete_across_four_services(chain, stream):
    results = run_requests(
        chain.base_url,
        chain.api_key,
        requests=6,
        concurrency=3,
        run=f"test-{stream}",
        stream=stream,
    )
    assert [r.status for r in results] == [200] * 6
    ids = {r.trace_id for r in results}
    traces, have = _complete(chain, ids)
    assert set(have) == ids
    for tid, spans in have.items():
        assert {s.service for s in spans} == SERVICES
        trace = prepare(tid, spans, Warnings())
        assert set(trace.stage) >= STAGES
        hops = {h for h in trace.hop if h}
        assert hops == {("client", "gateway"), ("gateway", "app"), ("app", "model")}
        if stream:
            root = trace.spans[trace.root]
            assert root.first_token_ns is not None
            assert any(s.first_token_ns for s in spans if s.service == "model")
    from tracer.analysis import TraceSet

    result = analyze(TraceSet({t: s for t, s in traces.traces.items() if t in ids}))
    assert {g.name for g in result.groups} >= STAGES | {"network"}
    assert sum(g.share for g in result.groups) == pytest.approx(1.0)


def test_readiness_checks_leave_no_trace_in_the_store(chain):
    """The chain's own GET /docs checks (at start, and docker compose's healthcheck) and
    the demo's settings calls are not traced: the store holds only the users' requests."""
    for port in chain.ports.values():
        assert httpx.get(f"http://127.0.0.1:{port}/docs", timeout=5).status_code == 200
    chain.configure_model(failure_rate=0.0)
    results = run_requests(
        chain.base_url, chain.api_key, requests=1, concurrency=1, run="ready", stream=False
    )
    # The request's trace arrived whole, so every span the services ended before it
    # (the checks above) has been exported too.
    traces, _ = _complete(chain, {r.trace_id for r in results})
    names = Counter(s.name for spans in traces.traces.values() for s in spans)
    assert names and not [n for n in names if "/docs" in n or "/admin" in n], names


def test_no_api_key_or_prompt_text_in_any_span(chain):
    from demo_app.client import PROMPT

    results = run_requests(
        chain.base_url, chain.api_key, requests=2, concurrency=1, run="secrets", stream=True
    )
    _, have = _complete(chain, {r.trace_id for r in results})
    for spans in have.values():
        for span in spans:
            blob = repr(span.attributes) + span.name
            assert chain.api_key not in blob
            assert PROMPT[:30] not in blob


def test_json_logs_lead_to_traces_and_hold_no_secrets(chain):
    from demo_app.client import PROMPT

    results = run_requests(
        chain.base_url, chain.api_key, requests=2, concurrency=1, run="logs", stream=False
    )
    ids = {r.trace_id for r in results}
    _complete(chain, ids)
    records = []
    for service in ("gateway", "app", "model"):
        text = (chain.log_dir / f"{service}.log").read_text()
        assert chain.api_key not in text and PROMPT[:30] not in text
        records += [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    mine = [r for r in records if r.get("trace_id") in ids]
    # Every service logged these requests, with the trace id that leads to the trace.
    assert {r["service"] for r in mine} == {"gateway", "app", "model"}
    assert all(len(r["span_id"]) == 16 for r in mine)
    done = [r for r in mine if r["event"] == "generated"]
    assert len(done) == 2 and all(r["status"] == 200 and r["latency_ms"] > 0 for r in done)


def test_bad_key_gets_401_and_missing_messages_400(chain):
    url = chain.base_url + "/chat/completions"
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(url, json=body, headers={"authorization": "Bearer wrong"}).status_code == 401
    assert httpx.post(url, json=body).status_code == 401
    bad = httpx.post(url, json={"model": "m"}, headers={"authorization": f"Bearer {chain.api_key}"})
    assert bad.status_code == 400


def test_rate_limit_answers_429_with_retry_after(tmp_path):
    with Chain(tmp_path / "s.db", profile="loopback", rate_limit=2.0) as limited:
        url = limited.base_url + "/chat/completions"
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        headers = {"authorization": f"Bearer {limited.api_key}"}
        codes = [httpx.post(url, json=body, headers=headers, timeout=30) for _ in range(5)]
    statuses = [r.status_code for r in codes]
    assert statuses[:2] == [200, 200]
    limited_responses = [r for r in codes if r.status_code == 429]
    assert limited_responses
    assert int(limited_responses[0].headers["retry-after"]) >= 1


def test_model_failures_fall_back_to_the_next_tier(chain):
    chain.configure_model(failure_rate=1.0)
    try:
        results = run_requests(
            chain.base_url, chain.api_key, requests=2, concurrency=1, run="fallback", stream=False
        )
    finally:
        chain.configure_model(failure_rate=0.0)
    assert [r.status for r in results] == [200, 200]
    _, have = _complete(chain, {r.trace_id for r in results})
    tiers = {s.attributes.get("hoptrace.fallback_tier") for spans in have.values() for s in spans}
    assert {"primary", "fallback_model"} <= tiers
    assert tiers & {"cached", "rule"}


def test_load_32_streaming_clients_for_20_s_loses_no_trace(chain):
    """32 concurrent streaming clients for 20 s: no 5xx, every completed request traced."""
    started = time.monotonic()
    results = run_requests(
        chain.base_url,
        chain.api_key,
        concurrency=32,
        duration_s=20.0,
        run="load",
        stream=True,
        render_ms=0.0,
    )
    took = time.monotonic() - started
    # Clients start no request after 20 s; the ones in flight end within their own
    # time (about 0.7 s quiet, a few seconds at a load average of 12). A hang would be
    # the client's timeout, minutes.
    assert 20.0 <= took < 90.0
    statuses = Counter(r.status for r in results)
    assert statuses == {200: len(results)}, statuses
    assert [r.error for r in results if r.error] == []
    assert all(r.chunks == 32 for r in results)
    # Each request takes about 0.7 s on the lan profile: about 900 requests from 32
    # clients in 20 s on a quiet machine. A busy one serves fewer; each client still
    # finishes several (a stalled chain would finish none).
    assert len(results) >= 3 * 32
    ids = {r.trace_id for r in results}
    assert len(ids) == len(results)
    _, have = _complete(chain, ids, deadline_s=120.0)
    missing = ids - set(have)
    assert not missing, f"{len(missing)} of {len(ids)} traces never reached the store"
    incomplete = [t for t, spans in have.items() if not {s.stage for s in spans} >= STAGES]
    assert not incomplete, f"{len(incomplete)} traces lack a stage"
    print(f"load: {len(results)} requests in {took:.1f} s, all {len(ids)} traces complete")


def _answers(chain: Chain) -> None:
    """One chat request through the gateway gets a 200."""
    done = httpx.post(
        chain.base_url + "/chat/completions",
        headers={"Authorization": f"Bearer {chain.api_key}"},
        json={"model": "sim-1", "messages": [{"role": "user", "content": "hi"}]},
        timeout=30,
    )
    assert done.status_code == 200, done.text


def test_ports_picked_free_but_taken_before_start_are_picked_again(tmp_path):
    """A chain picks its services' ports when it is made; another process (or an
    outgoing connection's source port) may take one before start() binds it: the chain
    picks again instead of failing. A port the caller chose still fails (see the demo's
    ``--port`` test in test_signals.py)."""
    import socket

    chain = Chain(tmp_path / "s.db", profile="loopback", rate_limit=0.0)
    taken = {name: chain.ports[name] for name in ("app", "model")}
    collector_port = chain.collector.port
    holders = []
    for port in [*taken.values(), collector_port]:
        sock = socket.socket()
        sock.bind(("127.0.0.1", port))
        sock.listen()
        holders.append(sock)
    try:
        with chain:
            assert all(chain.ports[name] != port for name, port in taken.items())
            assert chain.collector.port != collector_port  # the collector's too
            assert chain.model_url == f"http://127.0.0.1:{chain.ports['model']}/v1"
            _answers(chain)
    finally:
        for sock in holders:
            sock.close()


def test_ports_picked_the_same_twice_are_told_apart_and_each_service_answers(tmp_path):
    """Ports are picked by separate kernel calls whose sockets are closed at once, so the
    same port can come out twice: here the gateway's is the collector's and the app's
    is the model's. Were the services to bind them themselves, the collector (or the
    model) would hold the port, the gateway would fail to bind, and the readiness probe
    would take the collector's answer for the gateway's: requests would get a 404. The
    chain binds each service's socket itself and picks again for the loser."""
    chain = Chain(tmp_path / "s.db", profile="loopback", rate_limit=0.0)
    chain.ports["gateway"] = chain._picked["gateway"] = chain.collector.port
    chain.ports["app"] = chain._picked["app"] = chain.ports["model"]
    with chain:
        got = [chain.collector.port, *chain.ports.values()]
        assert len(set(got)) == 4, got
        _answers(chain)
        assert all(proc.poll() is None for proc in chain._procs)  # every service serves


def test_a_port_the_caller_chose_that_is_taken_fails_with_one_line(tmp_path):
    import socket

    from tracer._errors import HoptraceError

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        chain = Chain(tmp_path / "s.db", profile="loopback")
        chain.use_port("gateway", port)
        with pytest.raises(HoptraceError, match=f"gateway: port {port} is in use"):
            chain.start()


def test_a_profile_with_a_stage_faster_divides_that_stages_times():
    from demo_app.profiles import PROFILES, get_profile
    from tracer._errors import ConfigError

    lan = PROFILES["lan"]
    changed = get_profile("lan,inference.prefill=10,auth=0.5")
    assert changed.prefill_ms == lan.prefill_ms / 10 and changed.auth_ms == lan.auth_ms * 2
    assert changed.per_token_ms == lan.per_token_ms and changed.name.startswith("lan,")
    both = get_profile("seed,inference=4")  # the old name of wan, still taken
    assert both.per_token_ms == PROFILES["wan"].per_token_ms / 4
    for bad in ("lan,auth", "lan,auth=0", "lan,disk=2", "lan,auth=inf"):
        with pytest.raises(ConfigError, match="STAGE=K"):
            get_profile(bad)
