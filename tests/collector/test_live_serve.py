"""``hoptrace serve`` under ``hoptrace bench`` traffic: the stage shares and percentiles
read from two scrapes of GET /metrics agree with ``hoptrace analyze`` of the same store."""

from __future__ import annotations

import os
import subprocess
import sys
from bisect import bisect_left

import httpx
import orjson
import pytest

from collector import free_port
from collector.metrics import BUCKETS_S
from tests.collector.test_live_metrics import samples
from tests.conftest import wait_http
from tests.helpers import eventually

# Boots the demo chain's processes on loopback ports: run with -m integration.
pytestmark = pytest.mark.integration

REQUESTS = 60


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "tracer.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _start_serve(store) -> tuple[subprocess.Popen, int, int]:
    """``hoptrace serve`` once its banner says the chain answers: (process, gateway
    port, collector port). Ports picked free can be taken before the chain binds them
    (another test's server, an outgoing connection): the chain then stops with a line
    that says so, and the ports are picked again, up to three times."""
    for _ in range(3):
        port, otlp_port = free_port(), free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "tracer.cli", "serve", "--port", str(port),
             "--otlp-port", str(otlp_port), "--profile", "lan", "--store", str(store)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        said = []
        assert proc.stderr is not None
        for line in proc.stderr:  # ends when serve does
            said.append(line)
            if line.startswith("Ctrl-C to stop"):
                return proc, port, otlp_port
        proc.wait(timeout=60)
        text = "".join(said)
        if "in use" not in text:
            raise RuntimeError(f"hoptrace serve exited with {proc.returncode}: {text}")
    raise RuntimeError(f"hoptrace serve found its ports taken three times: {text}")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """``hoptrace serve`` with its collector's live metrics: (gateway URL, collector
    URL, store)."""
    store = tmp_path_factory.mktemp("live") / "spans.db"
    proc, port, otlp_port = _start_serve(store)
    gateway, collector = f"http://127.0.0.1:{port}/v1", f"http://127.0.0.1:{otlp_port}"
    wait_http(collector + "/metrics", deadline_s=60, proc=proc)
    try:
        yield gateway, collector, store
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def _bench(gateway: str, collector: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = collector
    env["OTEL_BSP_SCHEDULE_DELAY"] = "100"
    out = _cli(
        "bench", gateway, "--api-key", "hoptrace-demo-key", "--concurrency", "4",
        "--requests", str(REQUESTS), "--warmup", "4", "--max-tokens", "12",
        "--format", "json", env=env,
    )  # fmt: skip
    return orjson.loads(out)


def _of_sweep(labels: tuple, sweep: str | None) -> bool:
    """Whether a sample belongs to the traces of the bench sweep ``sweep`` (None: any)."""
    return sweep is None or dict(labels).get("run", "").startswith(sweep + "-")


def _total(scrape: dict, name: str, sweep: str | None = None, **match: str) -> float:
    return sum(
        v
        for (n, labels), v in scrape.items()
        if n == name
        and _of_sweep(labels, sweep)
        and all(dict(labels).get(k) == want for k, want in match.items())
    )


def _settled(collector: str, sweep: str, expected: float, deadline_s: float = 60) -> dict:
    """The scrape once the ``expected`` traces of ``sweep`` have been attributed."""

    def count(scrape: dict) -> float:
        return _total(scrape, "hoptrace_trace_duration_seconds_count", sweep)

    scrape = eventually(
        lambda: samples(httpx.get(collector + "/metrics").text),
        lambda s: count(s) >= expected,
        deadline_s,
    )
    assert count(scrape) >= expected, f"only {count(scrape)} of {expected} traces attributed"
    return scrape


def _buckets(scrape: dict, name: str, sweep: str) -> dict[float, float]:
    out: dict[float, float] = {}
    for (n, labels), v in scrape.items():
        if n == name + "_bucket" and _of_sweep(labels, sweep):
            le = float(dict(labels)["le"])
            out[le] = out.get(le, 0.0) + v
    return out


def histogram_quantile(q: float, buckets: dict[float, float]) -> float:
    """Prometheus's histogram_quantile: linear within the bucket the rank falls in."""
    bounds = sorted(buckets)
    total = buckets[float("inf")]
    rank = q * total
    lower, below = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if bound == float("inf"):
                return lower
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


def _bucket(seconds: float) -> int:
    return bisect_left(BUCKETS_S, seconds)


def test_shares_and_percentiles_from_two_scrapes_match_analyze_of_the_store(served, tmp_path):
    gateway, collector, store = served
    first_run = _bench(gateway, collector)
    first = _settled(collector, first_run["run"], REQUESTS + 4)
    measured = first_run["levels"][0]["run"]
    assert _total(first, "hoptrace_trace_duration_seconds_count", run=measured) == REQUESTS
    second_run = _bench(gateway, collector)
    sweep = second_run["run"]
    second = _settled(collector, sweep, REQUESTS + 4)
    delta = {k: v - first.get(k, 0.0) for k, v in second.items()}
    # The second sweep's traces (its warm-up and its measured level), nothing else.
    assert _total(delta, "hoptrace_trace_duration_seconds_count", sweep) == REQUESTS + 4
    assert _total(delta, "hoptrace_trace_duration_seconds_count", first_run["run"]) == 0
    assert _total(delta, "hoptrace_live_traces_dropped_total") == 0

    report = orjson.loads(_cli("analyze", str(store), "--run", sweep + "-*", "--format", "json"))
    assert report["traces"] == REQUESTS + 4
    e2e_sum = _total(delta, "hoptrace_trace_duration_seconds_sum", sweep)
    shares = {
        dict(labels)["stage"]: 0.0
        for (n, labels), _ in delta.items()
        if n == "hoptrace_stage_seconds_total" and _of_sweep(labels, sweep)
    }
    for stage in shares:
        shares[stage] = _total(delta, "hoptrace_stage_seconds_total", sweep, stage=stage) / e2e_sum
    analyzed = {g["name"]: g["share"] for g in report["groups"]}
    assert sum(shares.values()) == pytest.approx(1.0) and "inference.decode" in analyzed
    for stage in sorted(set(analyzed) | set(shares)):
        ours, theirs = shares.get(stage, 0.0), analyzed.get(stage, 0.0)
        print(f"{stage:>17}: metrics {ours * 100:6.2f}%  analyze {theirs * 100:6.2f}%")
        assert abs(ours - theirs) <= 0.005, stage

    for name, key in (
        ("hoptrace_trace_duration_seconds", "e2e_ms"),
        ("hoptrace_trace_ttft_seconds", "ttft_ms"),
    ):
        buckets = _buckets(delta, name, sweep)
        for q, field in ((0.5, "p50"), (0.9, "p90")):
            from_metrics = histogram_quantile(q, buckets)
            exact = report[key][field] / 1000
            print(
                f"{name} {field}: metrics {from_metrics * 1000:.1f} ms, analyze {exact * 1000:.1f} ms"
            )
            assert abs(_bucket(from_metrics) - _bucket(exact)) <= 1, (name, field)

    wide = {**os.environ, "COLUMNS": "160"}
    frame = _cli("top", "--collector", collector, "--by", "run", "--once", env=wide)
    assert second_run["levels"][0]["run"] in frame and "inference" in frame
