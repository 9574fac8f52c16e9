"""The load model on runs whose answer is known, beyond a closed loop of a sequential
chain: a fan-out whose hidden branch becomes critical, an open loop replayed from its
own arrivals, an open M/M/1 above capacity over a finite run (its queue grows
linearly), and a file whose traces all start together."""

from __future__ import annotations

import random

import orjson
import pytest

from tests.helpers import hoptrace
from tests.synthetic import to_otlp_json
from tracer import attributes as attrs
from tracer._errors import ConfigError
from tracer.analysis import TraceSet
from tracer.analysis.whatif.loadgraph import Stretch, Template
from tracer.analysis.whatif.loadmodel import project_load
from tracer.analysis.whatif.loadrun import LoadRun, load_run
from tracer.analysis.whatif.overload import overload, queue_growth
from tracer.analysis.whatif.scenario import Faster
from tracer.analysis.whatif.simulate import ACQUIRE, RELEASE, Step
from tracer.spans.model import KIND_INTERNAL, KIND_SERVER, Span

T0 = 1_760_000_000_000_000_000
MS = 1_000_000


def _traceset(traces: list[list[Span]]) -> TraceSet:
    out = TraceSet()
    for spans in traces:
        out.add(spans)
    return out


def _fanout(n: int = 40, gap_ms: float = 200.0) -> list[list[Span]]:
    """Requests 200 ms apart (one at a time, no bench spans: the gateway's server span
    is the root), each running retrieval (100 ms) and keyword search (60 ms) in
    parallel from its start, then 10 ms of its own."""
    traces = []
    for i in range(n):
        tid = f"{i + 1:032x}"
        start = T0 + int(i * gap_ms * MS)
        root = Span(tid, f"{3 * i + 1:016x}", None, "gateway", "POST /v1/chat", KIND_SERVER,
                    start, start + 110 * MS, "gateway", 0, None,
                    {attrs.STAGE: "gateway"})  # fmt: skip
        retrieval = Span(tid, f"{3 * i + 2:016x}", root.span_id, "gateway", "retrieve",
                         KIND_INTERNAL, start, start + 100 * MS, "retrieval", 0, None,
                         {attrs.STAGE: "retrieval"})  # fmt: skip
        keyword = Span(tid, f"{3 * i + 3:016x}", root.span_id, "gateway", "keyword",
                       KIND_INTERNAL, start, start + 60 * MS, "keyword", 0, None,
                       {attrs.STAGE: "keyword"})  # fmt: skip
        traces.append([root, retrieval, keyword])
    return traces


def test_a_parallel_sibling_becomes_critical_when_the_other_branch_gets_faster():
    run = load_run(_traceset(_fanout()))
    assert run.clients is None and not run.loaded
    # Retrieval 10x faster: 10 ms, but keyword search still takes 60: 60 + 10 = 70 ms.
    # Replaying the critical path alone (retrieval, then the gateway) would give 20.
    projected = project_load(run, Faster("retrieval", 10))
    assert projected.before.p50 == pytest.approx(110.0)
    assert projected.after.p50 == pytest.approx(70.0, rel=0.001)
    assert projected.after.p90 == pytest.approx(70.0, rel=0.001)
    # The branch that is not critical sped up: nothing changes.
    assert project_load(run, Faster("keyword", 10)).after.p50 == pytest.approx(110.0, rel=0.001)


def test_whatif_load_and_retime_agree_on_a_fanout_run_without_load(tmp_path):
    path = tmp_path / "fanout.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(to_otlp_json(t)) for t in _fanout()))
    args = ("--stage", "retrieval", "--speedup", "10", "--format", "json")
    loaded = orjson.loads(hoptrace("whatif", str(path), *args, "--model", "load").stdout)
    retimed = orjson.loads(hoptrace("whatif", str(path), *args, "--model", "retime").stdout)
    assert loaded["model"] == "load" and retimed["model"] == "retime"
    assert loaded["after_ms"]["p50"] == pytest.approx(retimed["after_ms"]["p50"], rel=0.001)
    assert loaded["after_ms"]["p50"] == pytest.approx(70.0, rel=0.001)


def _mm1(n: int, rate_per_s: float, service_ms: float, seed: int = 3) -> list[list[Span]]:
    """An open loop of Poisson arrivals at ``rate_per_s`` through one server (a pool of
    1 whose spans record their wait) of exponential service ``service_ms``: traces as
    a real M/M/1 queue makes them, first come, first served."""
    rng = random.Random(seed)
    traces = []
    t = 0.0
    free = 0.0
    for i in range(n):
        t += rng.expovariate(rate_per_s) * 1000
        service = rng.expovariate(1 / service_ms)
        begin = max(t, free)
        free = begin + service
        tid = f"{i + 1:032x}"
        start, end = T0 + int(t * MS), T0 + int(free * MS)
        root = Span(
            tid, f"{2 * i + 1:016x}", None, "gateway", "POST /v1/chat", KIND_SERVER,
            start, end, "gateway", 0, None,
            {attrs.STAGE: "gateway", attrs.POOL_NAME: "server", attrs.POOL_SIZE: 1,
             attrs.POOL_WAIT_NS: int((begin - t) * MS)},
        )  # fmt: skip
        traces.append([root])
    return traces


def test_an_open_mm1_above_capacity_grows_its_queue_linearly_and_is_replayed_as_it_was():
    # 20 requests/s sent into a server answering 10/s: over 400 requests (20 s) the
    # queue grows by (20 - 10) x 20 = 200 requests, linearly.
    run = load_run(_traceset(_mm1(400, 20.0, 100.0)))
    growth, mean = queue_growth(run)
    assert growth == pytest.approx(200, rel=0.25)
    assert mean == pytest.approx(growth / 2, rel=0.25)
    jam = overload(run)
    assert jam is not None
    assert jam.sent_per_s == pytest.approx(20, rel=0.15)
    assert jam.answered_per_s == pytest.approx(10, rel=0.15)
    # Replayed as it happened, the server 4x faster (25 ms: 40/s) keeps up with the
    # 20/s sent: each request waits a little (M/M/1 at rho 0.5: 50 ms on average);
    # the measured run's median was seconds of queue.
    projected = project_load(run, Faster("gateway", 4))
    assert projected.overloaded is not None
    assert "replayed as they came (overloaded" in projected.arrivals
    assert projected.before.p50 > 3000
    assert projected.simulated_before.p50 == pytest.approx(projected.before.p50, rel=0.15)
    assert projected.after.p50 < 100


def test_a_stable_open_loop_is_not_overloaded():
    run = load_run(_traceset(_mm1(400, 5.0, 100.0)))
    assert overload(run) is None
    projected = project_load(run, Faster("gateway", 2))
    assert projected.overloaded is None
    assert "an open loop of the run's own arrivals (5." in projected.arrivals
    assert projected.after.p90 >= projected.after.p50 >= projected.after.min


def test_an_overloaded_run_whose_limit_is_not_in_the_traces_is_declined_in_one_line(tmp_path):
    traces = _mm1(400, 20.0, 100.0)
    for spans in traces:
        for key in (attrs.POOL_NAME, attrs.POOL_SIZE, attrs.POOL_WAIT_NS):
            spans[0].attributes.pop(key)
    with pytest.raises(ConfigError, match="the run was overloaded"):
        project_load(load_run(_traceset(traces)), Faster("gateway", 4))
    path = tmp_path / "jam.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(to_otlp_json(t)) for t in traces))
    args = ("--stage", "gateway", "--speedup", "4", "--format", "json")
    refused = hoptrace("whatif", str(path), *args, "--model", "load")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().count("\n") == 0
    assert "the run was overloaded (overloaded: 2" in refused.stderr
    auto = hoptrace("whatif", str(path), *args)
    assert auto.returncode == 0, auto.stderr
    assert "model: retime, each trace retimed on its own: the run was overloaded" in auto.stderr


def test_traces_that_start_together_are_retimed_with_one_line_why(tmp_path):
    together = _fanout(n=30, gap_ms=0.0)
    path = tmp_path / "together.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(to_otlp_json(t)) for t in together))
    args = ("--stage", "retrieval", "--speedup", "10", "--format", "json")
    auto = hoptrace("whatif", str(path), *args)
    assert auto.returncode == 0, auto.stderr
    assert "model: retime" in auto.stderr and "started within 0.0 ms of each other" in auto.stderr
    assert "requests/s" not in auto.stderr
    assert orjson.loads(auto.stdout)["model"] == "retime"
    refused = hoptrace("whatif", str(path), *args, "--model", "load")
    assert refused.returncode != 0 and refused.stderr.strip().count("\n") == 0
    assert "needs a run spread in time" in refused.stderr


def test_projected_percentiles_stay_in_order_when_the_tail_drains_more_than_the_middle():
    # Measured: every request about 100 ms. The replay through one server at 60% load
    # (exponential services of 100 ms) has a queue's tail: P50 about 200, P90 about 700
    # ms; 4x faster the queue is gone. The P90's ratio is then smaller than the P50's,
    # and each measured percentile times its own ratio would put the P90 below the P50.
    rng = random.Random(5)
    starts, templates = [], []
    t = 0.0
    for _ in range(200):
        t += rng.expovariate(6.0)
        starts.append(t)
        service = rng.expovariate(1 / (100 * MS))
        templates.append(
            Template(
                ((), (Step(ACQUIRE, pool="server"), Stretch("gateway", service),
                      Step(RELEASE, pool="server"))),
                ((), (0,)),
                service,
            )
        )  # fmt: skip
    run = LoadRun(
        templates=tuple(templates), e2e_ms=tuple(100.0 + i % 3 for i in range(200)),
        ttft_ms=(), ttft_each=(None,) * 200, starts_s=tuple(starts), window_s=t + 0.1,
        answers_s=t, clients=None, cores=None, cpu_ns_per_request=None,
        pools={"server": 1}, unsized=(), in_flight=0.6,
    )  # fmt: skip
    projected = project_load(run, Faster("gateway", 4))
    sim = projected.simulated_before
    assert sim.p90 > 2 * sim.p50  # the replay has the queue's tail
    after = projected.after
    assert after.min <= after.p50 <= after.p90 <= after.p99 <= after.max
    assert after.p50 < 25
