"""The docker-compose stack without Docker: the demo chain sends through the real
OpenTelemetry Collector (``collector/otelcol-config.yaml`` itself) to the real Jaeger, to
the Collector's file exporter and to ``hoptrace collect``, which the real Prometheus
scrapes per ``collector/prometheus.yml``; every reader of the same traces agrees."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import httpx
import orjson
import pytest

import tracer
from collector.metrics import BUCKETS_S
from demo_app.chain import Chain
from demo_app.client import run_requests
from tests.backends import programs
from tests.conftest import CollectorProcess
from tests.helpers import eventually, fresh_tracer_provider, hoptrace
from tracer.analysis import analyze, load
from tracer.analysis.query import Query
from tracer.bench import stage_growth

pytestmark = [pytest.mark.integration, pytest.mark.backends, pytest.mark.timeout(600)]

REPO = programs.REPO
DASHBOARD = REPO / "collector" / "grafana" / "dashboards" / "hoptrace.json"
SPANMETRICS = REPO / "collector" / "otelcol-spanmetrics.yaml"
WARM, MEASURED = 3, 16
#: Every trace of the module: the dashboard's two parts, then the bench's warm-ups (2
#: at one client, 8 at eight) and its 16 requests at each level.
ALL = WARM + MEASURED + (2 + 8) + 2 * 16


class Stack:
    """The running programs and where each keeps the traces."""

    def __init__(self, folder: Path, exits: ExitStack):
        self.folder = folder
        self.jaeger = exits.enter_context(programs.jaeger(folder / "jaeger"))
        # The services export through the Collector, whose queue can hold a span past the
        # default second a complete-looking trace waits: the live figures wait longer.
        self.collect = CollectorProcess(folder / "spans.db", "--live-metrics", "--live-settle", "5")
        exits.callback(self.collect.stop)
        self.file = folder / "traces.jsonl"
        self.spanmetrics = folder / "spanmetrics.jsonl"
        env = programs.otelcol_env(self.jaeger.urls["otlp_grpc"], self.collect.endpoint, self.file)
        env["HOPTRACE_SPANMETRICS_FILE"] = str(self.spanmetrics)
        self.otelcol = exits.enter_context(
            programs.otelcol(folder / "otelcol", env, "--config", f"file:{SPANMETRICS}")
        )
        target = f"127.0.0.1:{self.collect.port}"
        self.prometheus = exits.enter_context(
            programs.prometheus(folder / "prometheus", programs.prometheus_config(target))
        )
        # The gateway's pool of 2 makes a knee at 8 clients (tests/bench/test_bench.py).
        # The services export to the Collector; the chain's own collector gets nothing.
        self.chain = exits.enter_context(
            Chain(
                folder / "unused.db",
                profile="lan",
                max_concurrency=2,
                otlp_endpoint=self.otelcol.urls["http"],
                log_dir=folder / "chain",
            )
        )
        fresh_tracer_provider()
        tracer.setup(service_name="client", endpoint=self.otelcol.urls["http"])
        exits.callback(tracer.shutdown)

    def counts(self) -> list[tuple[int, int]]:
        """Traces and spans in the store, the file and Jaeger (every service)."""
        tracer.force_flush()
        sources = [
            load([self.collect.store]),
            load([self.file]) if self.file.exists() else None,
            load([self.jaeger.urls["query"]], Query(limit=1000)),
        ]
        return [(len(t.traces), sum(map(len, t.traces.values()))) if t else (0, 0) for t in sources]

    def settled(self, traces: int) -> list[tuple[int, int]]:
        """The counts, once every source holds ``traces`` traces and the same spans."""
        counts = eventually(
            self.counts, lambda c: c[0][0] == traces and len(set(c)) == 1, deadline_s=60
        )
        assert len(set(counts)) == 1 and counts[0][0] == traces, counts
        return counts


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with ExitStack() as exits:
        yield Stack(tmp_path_factory.mktemp("stack"), exits)


def _prom(stack: Stack, path: str, **params: object) -> dict:
    resp = httpx.get(f"{stack.prometheus.urls['api']}/api/v1/{path}", params=params, timeout=10)
    body = resp.json()
    assert resp.status_code == 200 and body["status"] == "success", (params, body)
    return body["data"]


def _samples(stack: Stack, run: str) -> list[tuple[float, float]]:
    """Every scrape of the run's trace count (one series: one service, route, model)."""
    expr = f'hoptrace_trace_duration_seconds_count{{run="{run}"}}[10m]'
    result = _prom(stack, "query", query=expr)["result"]
    if not result:
        return []
    (series,) = result
    return [(float(t), float(v)) for t, v in series["values"]]


def _scraped(stack: Stack, run: str, count: int, times: int = 1) -> list[tuple[float, float]]:
    """The scrapes of the run's trace count, once Prometheus has ``times`` of ``count``
    (two: the trace counted last has all its other series updated too)."""
    got = eventually(
        lambda: _samples(stack, run),
        lambda s: sum(v == count for _, v in s) >= times,
        deadline_s=60,
    )
    assert sum(v == count for _, v in got) >= times, got
    return got


@pytest.fixture(scope="module")
def scraped(stack):
    """Requests of one run in two parts: the first makes every series and is scraped,
    the second is what the dashboard's rates cover: a window from the last scrape of
    the first part to a scrape of all (rate() then counts exactly the second part's
    traces). The run, the window, the evaluation time, the second part's ids."""
    run = "dashboard"
    chain = stack.chain
    warm = run_requests(chain.base_url, chain.api_key, requests=WARM, concurrency=1, run=run, max_tokens=16)  # fmt: skip
    _scraped(stack, run, WARM)
    measured = run_requests(chain.base_url, chain.api_key, requests=MEASURED, concurrency=2, run=run, max_tokens=16)  # fmt: skip
    assert all(r.status == 200 for r in warm + measured)
    scrapes = _scraped(stack, run, WARM + MEASURED, times=2)
    start = max(t for t, v in scrapes if v == WARM)
    end = max(t for t, v in scrapes if v == WARM + MEASURED)
    window_ms = round((end - start) * 1000) + 1
    return run, window_ms, end, {r.trace_id for r in measured}


def _fill(expr: str, run: str, window_ms: int) -> str:
    """A dashboard query with its variables filled in: this run, every route and model
    (the variables' "All", ``.*``), and the window for ``$__rate_interval``."""
    return (
        expr.replace("$run", run)
        .replace("$route", ".*")
        .replace("$model", ".*")
        .replace("$__rate_interval", f"{window_ms}ms")
    )


def _bucket(value_s: float) -> tuple[float, float]:
    bounds = (0.0, *BUCKETS_S, float("inf"))
    return next((lo, hi) for lo, hi in zip(bounds, bounds[1:], strict=False) if value_s <= hi)


def test_every_dashboard_query_agrees_with_analyze_on_the_same_traces(stack, scraped):
    run, window_ms, at, ids = scraped
    store = load([stack.collect.store])
    reference = analyze(store.subset(ids))
    assert reference.traces == MEASURED
    dashboard = json.loads(DASHBOARD.read_text())
    window_s = window_ms / 1000
    checked = 0
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = _fill(target["expr"], run, window_ms)
            result = _prom(stack, "query", query=expr, time=at)["result"]
            checked += 1
            values = {tuple(sorted(r["metric"].items())): float(r["value"][1]) for r in result}
            if "hoptrace_stage_seconds_total" in expr:  # shares of the critical path
                shares = {dict(k)["stage"]: v for k, v in values.items()}
                want = {g.name: g.share for g in reference.groups}
                assert set(shares) == set(want)
                for stage, share in want.items():
                    # 1 point would do; the window makes them equal but for rounding
                    assert shares[stage] == pytest.approx(share, abs=0.001), stage
            elif "histogram_quantile" in expr:
                q = float(re.search(r"histogram_quantile\(([0-9.]+)", expr).group(1))
                stats = reference.ttft if "ttft" in expr else reference.e2e
                want_ms = {0.5: stats.p50, 0.9: stats.p90}[q]
                (value,) = values.values()
                assert _bucket(value) == _bucket(want_ms / 1000), (expr, value, want_ms)
            elif "hoptrace_tokens_total" in expr:
                by_direction = {dict(k)["direction"]: v * window_s for k, v in values.items()}
                assert by_direction["input"] == pytest.approx(
                    reference.tokens.input_total, rel=1e-3
                )
                assert by_direction["output"] == pytest.approx(
                    reference.tokens.output_total, rel=1e-3
                )
            elif "hoptrace_trace_errors_total" in expr:
                assert all(v == 0 for v in values.values())  # no request failed
            elif "hoptrace_trace_duration_seconds_count" in expr:  # traces per second
                (value,) = values.values()
                assert value * window_s == pytest.approx(MEASURED, rel=1e-3)
            elif expr == "hoptrace_live_pending_traces":
                assert list(values.values()) == [0.0]
            else:  # the live drops and late spans: none
                assert all(v == 0 for v in values.values()), (expr, values)
    for variable in dashboard["templating"]["list"]:
        label = re.search(r"label_values\(([a-z_]+), ([a-z_]+)\)", variable["query"]["query"])
        names = _prom(stack, f"label/{label.group(2)}/values", **{"match[]": label.group(1)})
        assert names and (label.group(2) != "run" or run in names)
    assert checked >= 15


def _bench(stack: Stack, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = stack.otelcol.urls["http"]
    env["OTEL_SERVICE_NAME"] = "client"
    env["OTEL_BSP_SCHEDULE_DELAY"] = "100"
    return subprocess.run(
        [sys.executable, "-m", "tracer.cli", "bench", stack.chain.base_url, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def bench(stack, scraped):
    done = _bench(
        stack,
        "--api-key",
        stack.chain.api_key,
        "--concurrency",
        "1,8",
        "--requests",
        "16",
        "--warmup",
        "2",
        "--max-tokens",
        "8",
        "--traces",
        stack.jaeger.urls["query"],
        "--format",
        "json",
    )
    assert done.returncode == 0, done.stderr
    return orjson.loads(done.stdout)


def test_bench_names_the_same_grown_stage_from_jaeger_as_from_the_store(stack, bench):
    knee = bench["knee"]
    assert knee is not None and knee["concurrency"] == 8 and knee["stage"] == "gateway"
    store = load([stack.collect.store])
    by_run: dict[str, set[str]] = {}
    for tid, spans in store.traces.items():
        for s in spans:
            if s.parent_id is None and "hoptrace.run" in s.attributes:
                by_run.setdefault(s.attributes["hoptrace.run"], set()).add(tid)
    levels = {lv["concurrency"]: lv["run"] for lv in bench["levels"]}
    grown = stage_growth(store, by_run[levels[1]], by_run[levels[8]])
    assert grown is not None and grown[0] == knee["stage"]
    assert knee["stage_growth_ms"] == pytest.approx(grown[1], rel=0.01)


def test_jaeger_the_file_and_the_store_give_the_same_traces_and_shares(stack, bench):
    counts = stack.settled(ALL)
    answers = {}
    for name, source in (
        ("jaeger", stack.jaeger.urls["query"]),
        ("file", str(stack.file)),
        ("store", str(stack.collect.store)),
    ):
        extra = ["--limit", "1000"] if name == "jaeger" else []
        done = hoptrace("analyze", source, *extra, "--format", "json")
        assert done.returncode == 0, (name, done.stderr)
        answers[name] = orjson.loads(done.stdout)
    store = answers["store"]
    for name in ("jaeger", "file"):
        assert answers[name]["traces"] == store["traces"] == counts[0][0]
        assert answers[name]["spans"] == store["spans"]
        shares = {g["name"]: g["share"] for g in answers[name]["groups"]}
        for g in store["groups"]:
            assert shares[g["name"]] == pytest.approx(g["share"], abs=0.001), (name, g["name"])


def _spanmetrics(path: Path) -> dict[tuple[str, str], tuple[int, float]]:
    """The spanmetrics connector's count and duration sum (ms) of each (service, span
    name), from the file exporter's OTLP JSON lines: the last cumulative point of each
    series (per resource, two processes of one service being two, and per span kind and
    status), added up."""
    last: dict[tuple[str, str, str, bytes], tuple[int, float]] = {}
    for line in path.read_bytes().splitlines():
        for rm in orjson.loads(line).get("resourceMetrics", []):
            attrs = {a["key"]: a["value"] for a in rm["resource"]["attributes"]}
            resource = orjson.dumps(attrs, option=orjson.OPT_SORT_KEYS).decode()
            service = attrs["service.name"]["stringValue"]
            for sm in rm["scopeMetrics"]:
                for metric in sm["metrics"]:
                    if not metric["name"].endswith(".duration"):
                        continue
                    for point in metric["histogram"]["dataPoints"]:
                        name = next(
                            a["value"]["stringValue"]
                            for a in point["attributes"]
                            if a["key"] == "span.name"
                        )
                        series = (resource, service, name, orjson.dumps(point["attributes"]))
                        last[series] = (int(point["count"]), float(point["sum"]))
    out: dict[tuple[str, str], tuple[int, float]] = {}
    for (_, service, name, _), (count, total) in last.items():
        n, t = out.get((service, name), (0, 0.0))
        out[(service, name)] = (n + count, t + total)
    return out


def test_span_metrics_count_every_span_while_hoptrace_splits_the_critical_path(stack, bench):
    stack.settled(ALL)
    spans = [s for t in load([stack.collect.store]).traces.values() for s in t]
    per_span: dict[tuple[str, str], tuple[int, float]] = {}
    for s in spans:
        n, total = per_span.get((s.service, s.name), (0, 0.0))
        per_span[(s.service, s.name)] = (n + 1, total + s.duration_ns / 1e6)
    got = eventually(
        lambda: _spanmetrics(stack.spanmetrics) if stack.spanmetrics.exists() else {},
        lambda m: {k: v[0] for k, v in m.items()} == {k: v[0] for k, v in per_span.items()},
        deadline_s=30,
    )
    assert {k: v[0] for k, v in got.items()} == {k: v[0] for k, v in per_span.items()}
    for key, (_, total_ms) in per_span.items():
        assert got[key][1] == pytest.approx(total_ms, rel=1e-3, abs=0.01), key
    # Nested spans each count their children's time: the span durations add up to
    # more than the requests took; the critical-path stages add up to exactly that.
    result = analyze(load([stack.collect.store]))
    e2e_total_ms = result.e2e.mean * result.traces
    assert sum(v[1] for v in got.values()) > 2 * e2e_total_ms
    assert sum(g.share for g in result.groups) == pytest.approx(1.0, abs=1e-6)
