"""``hoptrace bench --rate``: the schedule follows the requested arrival process, a
real server sees the requests at that pace, and latency is measured from each
request's intended send time, so a server that stalls cannot hide its queue behind a
client that waited (coordinated omission)."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time

import orjson
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from tests.conftest import free_port
from tracer import attributes as attrs
from tracer.analysis.render import bench_dict
from tracer.bench import run_bench
from tracer.bench.openloop import Arrivals
from tracer.testing import capture_spans

CHUNK = {"choices": [{"index": 0, "delta": {"content": "hello "}}]}


@pytest.mark.parametrize(
    ("arrivals", "cv"),
    [(Arrivals("poisson"), 1.0), (Arrivals("constant"), 0.0), (Arrivals("gamma", 0.25), 2.0)],
)
def test_the_schedule_follows_the_requested_process(arrivals, cv):
    # 20,000 gaps at 8/s: mean 125 ms; the coefficient of variation of the gaps is 1
    # for Poisson, 0 for a constant rate, 1/sqrt(shape) for gamma.
    gaps = arrivals.gaps_s(8.0, 20_001, seed=7)[1:]
    mean = statistics.fmean(gaps)
    assert mean == pytest.approx(0.125, rel=0.03)
    assert statistics.pstdev(gaps) / mean == pytest.approx(cv, abs=0.06 * max(cv, 1))


class _Server:
    """A chat endpoint on loopback that records when each request arrived; the request
    numbered ``stall_at`` (from 1) answers after ``stall_s``."""

    def __init__(self, stall_at: int = 0, stall_s: float = 0.0, one_at_a_time_s: float = 0.0):
        self.arrived: list[float] = []
        self.stall_at, self.stall_s = stall_at, stall_s
        self.serial_s = one_at_a_time_s
        self.lock = asyncio.Lock()

    async def answer(self, request: Request) -> StreamingResponse:
        self.arrived.append(time.monotonic())
        number = len(self.arrived)
        await request.body()

        async def body():
            if number == self.stall_at:
                await asyncio.sleep(self.stall_s)
            if self.serial_s:
                async with self.lock:  # one request at a time: a capacity of 1/serial_s
                    await asyncio.sleep(self.serial_s)
            yield b"data: " + json.dumps(CHUNK).encode() + b"\n\ndata: [DONE]\n\n"

        return StreamingResponse(body(), media_type="text/event-stream")


@pytest.fixture
def serve(serve_app):
    def start(handler: _Server) -> str:
        app = Starlette(routes=[Route("/v1/chat/completions", handler.answer, methods=["POST"])])
        url = serve_app(app)
        handler.arrived.clear()
        return url + "/v1"

    return start


def test_the_server_sees_the_requests_at_the_rate_sent(serve):
    handler = _Server()
    url = serve(handler)
    result = run_bench(url, rates=[20.0], arrivals=Arrivals("constant"), requests=30, warmup=0)
    (level,) = result.levels
    assert len(level.ok) == 30 and level.rate_per_s == 20.0 and level.run.endswith("-r20")
    gaps = [b - a for a, b in zip(handler.arrived, handler.arrived[1:], strict=False)]
    # 50 ms apart as sent; a busy machine delays single sends, not the pace.
    assert statistics.median(gaps) == pytest.approx(0.050, abs=0.015)
    assert (handler.arrived[-1] - handler.arrived[0]) == pytest.approx(29 * 0.050, rel=0.2)


def test_latency_from_the_intended_send_time_counts_the_wait_a_stall_caused(serve):
    # One request at a time (--max-concurrency 1), 20 sent a second: the 5th stalls
    # 600 ms, and the 12 whose time came meanwhile wait for the slot. From their
    # actual send they look quick; from their intended send time they waited.
    handler = _Server(stall_at=5, stall_s=0.6)
    url = serve(handler)
    with capture_spans() as spans:
        result = run_bench(
            url, rates=[20.0], arrivals=Arrivals("constant"), requests=20, warmup=0,
            max_concurrency=1,
        )  # fmt: skip
    (level,) = result.levels
    figures = level.open_loop()
    assert figures is not None and len(level.ok) == 20
    assert level.e2e().p90 < 300
    assert figures["e2e_from_intended_ms"].p90 > 300
    assert figures["e2e_from_intended_ms"].max > 500
    assert figures["queue_ms"].max > 450
    out = bench_dict(result)["levels"][0]
    assert out["rate_per_s"] == 20 and out["max_concurrency"] == 1
    assert out["e2e_from_intended_ms"]["p90"] > out["e2e_ms"]["p90"]
    roots = [s for s in spans.spans if s.name == "bench request"]
    assert len(roots) == 20
    assert all(s.attributes[attrs.BENCH_RATE] == 20.0 for s in roots)
    assert all(s.attributes[attrs.BENCH_ARRIVALS] == "constant" for s in roots)
    assert all(attrs.BENCH_CONCURRENCY not in s.attributes for s in roots)
    assert max(s.attributes[attrs.BENCH_QUEUE_NS] for s in roots) > 450e6


def test_the_knee_is_the_first_rate_the_answers_stop_following(serve):
    # One request at a time, 40 ms each: 25 answers a second at most. 10/s is
    # followed; at 60/s the answers come at 25/s and the queue grows through the level.
    url = serve(_Server(one_at_a_time_s=0.04))
    result = run_bench(url, rates=[10.0, 60.0], arrivals=Arrivals("constant"), requests=30,
                       warmup=0)  # fmt: skip
    low, high = result.levels
    assert low.answer_rate() == pytest.approx(10.0, rel=0.25)
    assert high.answer_rate() == pytest.approx(25.0, rel=0.25)
    assert result.rate_knee is not None
    assert (result.rate_knee.rate_per_s, result.rate_knee.from_rate_per_s) == (60.0, 10.0)


def test_the_command_takes_a_rate_sweep_and_refuses_mixed_loops(serve):
    url = serve(_Server())
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{free_port()}"  # nobody there

    def bench(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "tracer.cli", "bench", url, "--requests", "10",
             "--warmup", "2", *args],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    done = bench("--rate", "10,20", "--format", "json")
    assert done.returncode == 0, done.stderr
    out = orjson.loads(done.stdout)
    assert [lv["rate_per_s"] for lv in out["levels"]] == [10, 20]
    assert out["levels"][0]["arrivals"] == "poisson" and out["rate_knee"] is None
    table = bench("--rate", "10", "--arrivals", "gamma", "--burstiness", "0.5")
    assert table.returncode == 0, table.stderr
    assert "Open loop: latency from each request's intended send time" in table.stdout
    for args, words in [
        (("--rate", "10", "--concurrency", "4"), "give one"),
        (
            (
                "--max-concurrency",
                "2",
            ),
            "add --rate",
        ),
        (("--rate", "fast"), "--rate must be requests per second"),
        (("--rate", "10", "--burstiness", "0.5"), "add --arrivals gamma"),
    ]:
        refused = bench(*args)
        assert refused.returncode != 0 and "Traceback" not in refused.stderr
        assert words in refused.stderr and refused.stderr.strip().count("\n") == 0
