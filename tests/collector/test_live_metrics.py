"""Live critical-path metrics: traces attributed as they complete, served as Prometheus
text at GET /metrics, summed for hoptrace top at GET /live, pushed by OTLP when asked."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import SpanKind, Status, StatusCode
from prometheus_client.parser import text_string_to_metric_families

from collector import BackgroundCollector, free_port
from collector.metrics import OTHER, LabelLimiter
from collector.pending import PendingTraces
from tests.conftest import CollectorProcess
from tests.helpers import eventually
from tests.synthetic import SeededIds
from tracer import attributes as attrs
from tracer.analysis.loaders.arrival import is_complete
from tracer.spans.model import Span


def _span(tid: str, sid: str, parent: str | None, service: str) -> Span:
    return Span(tid, sid, parent, service, "op", 2, 0, 10)


def _pending(**kw) -> PendingTraces:
    return PendingTraces(is_complete, lambda spans: "run", **kw)


def test_a_trace_waits_for_a_service_its_siblings_went_through():
    pending = _pending(settle_s=0.5, timeout_s=10)
    pending.add([_span("a", "1", None, "client"), _span("a", "2", "1", "gateway")], 0.0)
    assert [t for t, _ in pending.take(1.0)[0]] == ["a"]
    pending.add([_span("b", "1", None, "client")], 2.0)  # gateway's spans not yet in
    assert pending.take(3.0) == ([], [])
    pending.add([_span("b", "2", "1", "gateway")], 3.0)
    assert pending.take(3.2) == ([], [])  # complete, but not yet quiet for settle_s
    assert [t for t, _ in pending.take(3.6)[0]] == ["b"]


def test_an_incomplete_trace_times_out_and_a_late_span_is_counted():
    pending = _pending(settle_s=0.5, timeout_s=5)
    pending.add([_span("c", "2", "1", "gateway")], 0.0)  # its parent never comes
    assert pending.take(4.0) == ([], [])
    ready, timed_out = pending.take(5.0)
    assert ready == [] and [t for t, _ in timed_out] == ["c"]
    pending.add([_span("c", "3", "2", "model")], 6.0)
    assert pending.late_spans == 1 and len(pending) == 0


def test_pending_spans_past_the_cap_evict_the_oldest_traces():
    pending = _pending(settle_s=0.5, timeout_s=5, max_spans=10)
    for i in range(8):  # 16 spans of traces that stay incomplete
        pending.add([_span(f"t{i}", "2", "1", "x"), _span(f"t{i}", "3", "2", "x")], float(i))
    assert pending.spans_held <= 10 and pending.evicted == 3
    assert len(pending) == 5


def test_label_values_past_a_limit_become_other_and_are_counted():
    limiter = LabelLimiter({"service": 2, "run": 5, "model": 5, "route": 5}, max_sets=100)
    assert limiter(("a", "r", "m", "/")) == ("a", "r", "m", "/")
    assert limiter(("b", "r", "m", "/"))[0] == "b"
    assert limiter(("c", "r", "m", "/")) == (OTHER, "r", "m", "/")
    assert limiter(("a", "r", "m", "/")) == ("a", "r", "m", "/")  # known values stay
    assert limiter.overflow["service"] == 1


def send_chat_trace(
    endpoint: str,
    error: bool = False,
    run: str = "live-test",
    sampler: Any = None,
    ids: IdGenerator | None = None,
) -> bool:
    """One chat request's trace through the real OTLP exporter: a client root, a gateway
    server span with its route, and an inference span with tokens and a first token.
    With ``sampler`` on both services' providers and the client's trace ids from ``ids``
    (the SDK's random ones by default); returns whether the trace was kept."""
    provider = TracerProvider(
        resource=Resource.create({"service.name": "client"}), sampler=sampler, id_generator=ids
    )
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint + "/v1/traces"))
    )
    model = TracerProvider(resource=Resource.create({"service.name": "model"}), sampler=sampler)
    model.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint + "/v1/traces"))
    )
    t0 = time.time_ns()
    ms = 1_000_000
    root = provider.get_tracer("t").start_span(
        "chat", kind=SpanKind.CLIENT, start_time=t0, attributes={attrs.RUN: run}
    )
    from opentelemetry import trace

    ctx = trace.set_span_in_context(root)
    server = model.get_tracer("t").start_span(
        "POST /v1/chat/completions",
        context=ctx,
        kind=SpanKind.SERVER,
        start_time=t0 + 2 * ms,
        attributes={"http.route": "/v1/chat/completions", attrs.STAGE: "gateway"},
    )
    inner = model.get_tracer("t").start_span(
        "generate",
        context=trace.set_span_in_context(server),
        start_time=t0 + 5 * ms,
        attributes={
            attrs.STAGE: "inference",
            attrs.GEN_AI_REQUEST_MODEL: "demo-model",
            attrs.GEN_AI_INPUT_TOKENS: 12,
            attrs.GEN_AI_OUTPUT_TOKENS: 30,
        },
    )
    inner.add_event(attrs.FIRST_TOKEN_EVENT, timestamp=t0 + 40 * ms)
    if error:
        inner.set_status(Status(StatusCode.ERROR, "boom"))
    inner.end(end_time=t0 + 90 * ms)
    server.end(end_time=t0 + 95 * ms)
    root.add_event(attrs.FIRST_TOKEN_EVENT, timestamp=t0 + 42 * ms)  # the client's first chunk
    root.end(end_time=t0 + 100 * ms)
    provider.shutdown()
    model.shutdown()
    return root.get_span_context().trace_flags.sampled


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """(sample name, sorted labels) -> value of a Prometheus text exposition."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def wait_for(url: str, name: str, labels: dict[str, str], value: float, deadline_s: float = 20):
    """Poll ``url`` until sample ``name`` with ``labels`` reaches ``value``."""
    key = (name, tuple(sorted(labels.items())))
    return eventually(
        lambda: samples(httpx.get(url).text), lambda got: got.get(key, 0) >= value, deadline_s
    )


@pytest.fixture
def live(tmp_path):
    with BackgroundCollector(tmp_path / "spans.db", live_metrics=True) as collector:
        yield collector


def test_metrics_give_the_critical_path_of_each_trace_by_stage(live):
    send_chat_trace(live.endpoint)
    send_chat_trace(live.endpoint, error=True)
    labels = {
        "service": "client",
        "run": "live-test",
        "model": "demo-model",
        "route": "/v1/chat/completions",
    }
    got = wait_for(live.endpoint + "/metrics", "hoptrace_trace_duration_seconds_count", labels, 2)
    key = tuple(sorted(labels.items()))
    assert got[("hoptrace_trace_duration_seconds_count", key)] == 2
    assert got[("hoptrace_trace_duration_seconds_sum", key)] == pytest.approx(0.2)
    stage = {
        dict(k)["stage"]: v for (n, k), v in got.items() if n == "hoptrace_stage_seconds_total"
    }
    # per trace: the client span's 2 + 5 ms around the server span are the network hop,
    # gateway 3 + 5 ms, inference 85 ms; they sum to the end-to-end 100 ms
    assert stage == pytest.approx({"network": 0.014, "gateway": 0.016, "inference": 0.17})
    assert got[("hoptrace_trace_ttft_seconds_sum", key)] == pytest.approx(0.084)
    assert got[("hoptrace_trace_errors_total", key)] == 1
    tokens = {dict(k)["direction"]: v for (n, k), v in got.items() if n == "hoptrace_tokens_total"}
    assert tokens == {"input": 24, "output": 60}
    assert got[("hoptrace_live_traces_attributed_total", (("how", "complete"),))] == 2
    assert got[("hoptrace_collector_spans_stored_total", ())] == 6


def test_live_sums_the_window_per_model(live):
    send_chat_trace(live.endpoint)
    wait_for(
        live.endpoint + "/metrics", "hoptrace_live_traces_attributed_total", {"how": "complete"}, 1
    )
    body = httpx.get(live.endpoint + "/live", params={"by": "model", "window": "60"}).json()
    (row,) = body["rows"]
    assert row["model"] == "demo-model" and row["traces"] == 1
    assert row["e2e_p50_ms"] == pytest.approx(100.0)
    assert row["ttft_p50_ms"] == pytest.approx(42.0)
    assert sum(row["shares"].values()) == pytest.approx(1.0)
    assert row["output_tokens_per_s"] == pytest.approx(30 / 60)


def test_top_fits_80_columns_with_whole_labels_and_units(live):
    """``hoptrace top`` piped or in a default terminal: every line within 80 columns,
    the route whole, nothing cut with an ellipsis, the times' unit in the title, and
    the shares on a line of their own."""
    send_chat_trace(live.endpoint)
    wait_for(
        live.endpoint + "/metrics", "hoptrace_live_traces_attributed_total", {"how": "complete"}, 1
    )
    top = subprocess.run(
        [sys.executable, "-m", "tracer.cli", "top", "--collector", live.endpoint, "--once"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert top.returncode == 0, top.stderr
    lines = [line.rstrip() for line in top.stdout.splitlines()]
    assert max(map(len, lines)) <= 80 and "\u2026" not in top.stdout
    assert "by route; times in ms" in lines[0]
    assert lines[1].split() == "route traces P50 P90 TTFT P50 TTFT P90 tok/s errors".split()
    row = next(line for line in lines if line.startswith("/v1/chat/completions "))
    assert row.split()[1:4] == ["1", "100", "100"]
    shares = lines[lines.index("critical-path share") + 1]
    assert shares.split()[0] == "/v1/chat/completions" and "inference\u00a085%" in shares


def test_sampled_traces_count_for_the_traffic_they_stand_for(live):
    """Traces kept one in four by hoptrace's consistent probability sampler (its
    threshold ``ot=th:c`` in every span's trace state) count four times each in the
    histograms, counters and the window: the metrics estimate all the traffic."""
    from tracer.sampling.samplers import ConsistentProbabilitySampler

    sampler = ConsistentProbabilitySampler(0.25)
    ids = SeededIds(24)  # the same trace ids every run, so the same ones are kept
    kept = sum(send_chat_trace(live.endpoint, sampler=sampler, ids=ids) for _ in range(24))
    assert kept == sum(map(sampler.keeps, ids.trace_ids))
    assert 1 <= kept < 24  # about six
    labels = {
        "service": "client",
        "run": "live-test",
        "model": "demo-model",
        "route": "/v1/chat/completions",
    }
    got = wait_for(
        live.endpoint + "/metrics", "hoptrace_trace_duration_seconds_count", labels, 4 * kept
    )
    key = tuple(sorted(labels.items()))
    assert got[("hoptrace_trace_duration_seconds_count", key)] == 4 * kept
    assert got[("hoptrace_trace_duration_seconds_sum", key)] == pytest.approx(0.4 * kept)
    bucket = dict(key + (("le", "0.1"),))  # every trace takes 100 ms
    assert got[("hoptrace_trace_duration_seconds_bucket", tuple(sorted(bucket.items())))] == (
        4 * kept
    )
    stage = {
        dict(k)["stage"]: v for (n, k), v in got.items() if n == "hoptrace_stage_seconds_total"
    }
    assert stage == pytest.approx(
        {"network": 0.028 * kept, "gateway": 0.032 * kept, "inference": 0.34 * kept}
    )
    tokens = {dict(k)["direction"]: v for (n, k), v in got.items() if n == "hoptrace_tokens_total"}
    assert tokens == {"input": 48 * kept, "output": 120 * kept}
    assert got[("hoptrace_live_traces_attributed_total", (("how", "complete"),))] == kept
    body = httpx.get(live.endpoint + "/live", params={"by": "model", "window": "60"}).json()
    (row,) = body["rows"]
    assert row["traces"] == kept and row["estimated_traces"] == 4 * kept
    assert row["e2e_p50_ms"] == pytest.approx(100.0)
    assert row["output_tokens_per_s"] == pytest.approx(4 * kept * 30 / 60)
    top = subprocess.run(
        [sys.executable, "-m", "tracer.cli", "top", "--collector", live.endpoint, "--once"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert top.returncode == 0, top.stderr
    assert f"{kept} traces (standing for {4 * kept})" in top.stdout


def test_the_windows_percentiles_take_each_trace_by_its_weight():
    from collector.window import Window

    window = Window(clock=lambda: 100.0)
    labels = ("svc", "run", "model", "/r")
    for e2e_s, weight in ((0.1, 1.0), (0.2, 1.0), (0.3, 1.0), (0.4, 1.0)):
        window.record(labels, e2e_s, None, {"inference": e2e_s}, (0, 10), False, weight)
    (plain,) = window.summary("route", 60)["rows"]
    # weights of 1: the plain quantile, linear between closest ranks
    assert plain["e2e_p50_ms"] == pytest.approx(250.0)
    assert plain["e2e_p90_ms"] == pytest.approx(370.0)
    window = Window(clock=lambda: 100.0)
    for e2e_s, weight, error in ((0.1, 1.0, False), (0.4, 3.0, True)):
        window.record(labels, e2e_s, None, {"inference": e2e_s}, (0, 10), error, weight)
    (row,) = window.summary("route", 60)["rows"]
    # as the values 0.1, 0.4, 0.4, 0.4
    assert row["e2e_p50_ms"] == pytest.approx(400.0)
    assert row["e2e_p90_ms"] == pytest.approx(400.0)
    assert row["traces"] == 2 and row["estimated_traces"] == 4
    assert row["error_rate"] == pytest.approx(0.75)
    assert row["output_tokens_per_s"] == pytest.approx(40 / 60)


def test_bad_live_requests_get_a_4xx_with_the_reason(live):
    bad_by = httpx.get(live.endpoint + "/live", params={"by": "colour"})
    assert bad_by.status_code == 400 and "by must be one of" in bad_by.json()["message"]
    bad_window = httpx.get(live.endpoint + "/live", params={"window": "soon"})
    assert bad_window.status_code == 400 and "window" in bad_window.json()["message"]
    assert httpx.post(live.endpoint + "/metrics").status_code == 405


def test_metrics_are_404_with_the_option_to_name_when_live_metrics_are_off(tmp_path):
    with BackgroundCollector(tmp_path / "spans.db", live_metrics=False) as collector:
        answer = httpx.get(collector.endpoint + "/metrics")
    assert answer.status_code == 404 and "--live-metrics" in answer.json()["message"]


class _MetricsReceiver(BaseHTTPRequestHandler):
    got: list[ExportMetricsServiceRequest] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["content-length"]))
        if self.path == "/v1/metrics":
            self.got.append(ExportMetricsServiceRequest.FromString(body))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_the_same_instruments_go_out_by_otlp_when_asked(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _MetricsReceiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with BackgroundCollector(
            tmp_path / "spans.db", live_metrics=True, otlp_metrics_endpoint=endpoint
        ) as collector:
            send_chat_trace(collector.endpoint)
            wait_for(
                collector.endpoint + "/metrics",
                "hoptrace_live_traces_attributed_total",
                {"how": "complete"},
                1,
            )
        # stopping the collector flushes the OTLP metrics
    finally:
        server.shutdown()
    metrics = {
        m.name: m
        for request in _MetricsReceiver.got
        for rm in request.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    assert {"hoptrace.trace.duration", "hoptrace.trace.ttft", "hoptrace.stage.time"} <= set(metrics)
    point = metrics["hoptrace.trace.duration"].histogram.data_points[0]
    assert point.count == 1 and point.sum == pytest.approx(0.1)
    labels = {a.key: a.value.string_value for a in point.attributes}
    assert labels["route"] == "/v1/chat/completions" and labels["model"] == "demo-model"


def test_top_says_in_one_line_when_no_collector_answers():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tracer.cli",
            "top",
            "--collector",
            f"http://127.0.0.1:{free_port()}",
            "--once",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("hoptrace: error: no collector answers at")
    assert len(done.stderr.strip().splitlines()) == 1


def test_metric_names_stay_what_the_docs_list():
    docs = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    for name in ("hoptrace_trace_duration_seconds", "hoptrace_trace_ttft_seconds",
                 "hoptrace_stage_seconds_total", "hoptrace_tokens_total", "hoptrace_trace_errors_total"):  # fmt: skip
        assert f"`{name}`" in docs


def test_with_a_token_the_metrics_need_it_too(tmp_path):
    with BackgroundCollector(tmp_path / "spans.db", live_metrics=True, token="s3cret") as c:
        refused = httpx.get(c.endpoint + "/metrics")
        served = httpx.get(c.endpoint + "/metrics", headers={"authorization": "Bearer s3cret"})
        top = subprocess.run(
            [sys.executable, "-m", "tracer.cli", "top", "--collector", c.endpoint, "--once",
             "--token", "s3cret"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert refused.status_code == 401 and "bearer token" in refused.json()["message"]
    assert served.status_code == 200 and "hoptrace_trace_duration_seconds" in served.text
    assert top.returncode == 0 and "no trace attributed in the window yet" in top.stdout


class _Sink:
    def __init__(self) -> None:
        self.traces: list[tuple] = []

    def record(self, labels, e2e_s, ttft_s, stages, tokens, error, weight=1.0) -> None:
        self.traces.append((labels, e2e_s, stages))


def test_a_timed_out_trace_is_attributed_as_it_is_with_its_root_and_dropped_without():
    from collector.store import span_row
    from tracer.analysis.live.attribution import LiveAttribution

    sink = _Sink()
    live = LiveAttribution([sink], settle_s=0.5, timeout_s=5, max_spans=1000)
    with_root = [
        Span("a" * 32, "1" * 16, None, "gateway", "POST", 2, 0, 100_000_000),
        Span("a" * 32, "3" * 16, "2" * 16, "model", "gen", 2, 10_000_000, 90_000_000),
    ]  # the model span's parent (an app span) never comes
    no_root = [Span("b" * 32, "3" * 16, "2" * 16, "model", "gen", 2, 0, 50_000_000)]
    live.add_rows([span_row(s) for s in with_root + no_root], 0.0)
    assert live.tick(4.0) == 0 and sink.traces == []
    assert live.tick(5.0) == 1
    ((labels, e2e_s, stages),) = sink.traces
    assert labels[0] == "gateway" and e2e_s == pytest.approx(0.1)
    assert sum(stages.values()) == pytest.approx(0.1)  # the orphan is re-parented to the root
    counts = live.counts()
    assert counts["attributed"]["timed_out"] == 1 and counts["dropped"]["no_root"] == 1
    assert counts["pending_spans"] == 0


def test_live_settle_holds_a_complete_trace_that_long_for_late_spans(tmp_path):
    """``hoptrace collect --live-settle``: a trace that looks complete is taken once none
    of its spans has come for that long (the default, 1 s, takes it about 1 s after)."""
    collector = CollectorProcess(tmp_path / "spans.db", "--live-metrics", "--live-settle", "4")
    try:
        sent = time.monotonic()
        send_chat_trace(collector.endpoint)
        key = ("hoptrace_live_traces_attributed_total", (("how", "complete"),))
        got = eventually(
            lambda: samples(httpx.get(collector.endpoint + "/metrics").text),
            lambda s: s.get(key, 0) >= 1,
            deadline_s=30,
        )
        waited = time.monotonic() - sent
    finally:
        collector.stop()
    assert got[key] == 1
    # Not before the settle time (a lower bound, so it holds on a busy machine).
    assert waited >= 4.0, waited


@pytest.mark.parametrize("value", ["-1", "30", "soon"])
def test_a_bad_live_settle_is_refused_in_one_line(tmp_path, value):
    done = subprocess.run(
        [sys.executable, "-m", "tracer.cli", "collect", "--store", str(tmp_path / "s.db"),
         "--live-settle", value],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert "--live-settle" in lines[-1] and "Traceback" not in done.stderr, done.stderr
