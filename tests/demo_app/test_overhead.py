"""The tracing-cost measurement: an untraced chain really sends nothing, the ack-only
receiver acknowledges OTLP, and the numbers are traced minus untraced."""

from __future__ import annotations

import httpx
import pytest

from collector import SpanStore
from demo_app.chain import Chain
from demo_app.overhead import ack_receiver, measure_overhead
from tracer.analysis import load

# Boots real service processes on loopback ports: run with -m integration.
pytestmark = pytest.mark.integration


def _chat(chain: Chain) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    resp = httpx.post(
        chain.base_url + "/chat/completions",
        json=body,
        headers={"authorization": f"Bearer {chain.api_key}"},
        timeout=30,
    )
    assert resp.status_code == 200


def test_an_untraced_chain_answers_and_exports_no_span(tmp_path):
    with Chain(tmp_path / "u.db", profile="loopback", traced=False) as chain:
        for _ in range(3):
            _chat(chain)
        # The services' batch processors would have exported within 100 ms
        # (OTEL_BSP_SCHEDULE_DELAY in conftest): stop them, which flushes what they hold.
    with SpanStore(tmp_path / "u.db") as store:
        assert store.count() == 0


def test_ack_receiver_acknowledges_otlp_and_keeps_nothing():
    with ack_receiver() as endpoint:
        for _ in range(2):  # one connection, two requests: keep-alive works
            resp = httpx.post(
                endpoint + "/v1/traces",
                content=b"\x0a\x00" * 100,
                headers={"content-type": "application/x-protobuf"},
            )
            assert resp.status_code == 200 and resp.content == b""


def test_measure_overhead_runs_both_chains_through_both_sinks():
    for sink in ("collector", "ack"):
        o = measure_overhead(requests=8, warmup=2, pairs=2, sink=sink)
        assert len(o.pairs) == 2
        assert all(p.traced_p50 > 0 and p.untraced_p50 > 0 for p in o.pairs)
        assert all(p.traced_rps > 0 and p.untraced_rps > 0 for p in o.pairs)
        # The traced chain's spans went to the sink asked for (the chains stop, and so
        # flush, before the measurement returns).
        assert (o.exports > 0) if sink == "ack" else (o.exports == 0)


def test_a_traced_chain_exports_spans(tmp_path):
    with Chain(tmp_path / "t.db", profile="loopback") as chain:
        _chat(chain)
    assert {s.service for spans in load([tmp_path / "t.db"]).traces.values() for s in spans} >= {
        "gateway",
        "app",
        "model",
    }


def test_a_chain_that_samples_nothing_exports_nothing_and_a_bad_ratio_is_refused():
    o = measure_overhead(requests=8, warmup=2, pairs=1, sink="ack", sample_ratio=0.0)
    assert len(o.pairs) == 1 and o.exports == 0
    with pytest.raises(ValueError, match="sample_ratio must be in 0..1"):
        measure_overhead(requests=8, sample_ratio=1.5)
