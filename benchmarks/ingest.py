"""Sustained ingest of ``hoptrace collect``: does the rate stay flat over millions of spans?

5,000,000 spans (by default) in 512-span OTLP protobuf batches, as BatchSpanProcessors
send them, from 4 sender threads to a ``hoptrace collect`` process on loopback. One
batch is made by the OpenTelemetry SDK and encoded by its own exporter encoder; every
request carries it with new trace ids (their first 8 bytes are the request's number),
so each span is new to the store and the client spends no time encoding. Senders
honour 503/429 with ``Retry-After`` as the exporter does.

Printed, from one run: spans/s in each window of 500,000 acknowledged spans (answered
200, that is committed) and the collector's CPU time per span in it, each against the
first window, the collector's peak RSS, and what the store holds against what was
sent. Then the store alone, in this process: the cost per span of a group commit of
512, 100,000 and 300,000 spans once 600,000 are stored, against batches of 512 into a
small store (interleaved, medians of three rounds).

Targets: the last window at least 80% of the first; none lost; a commit costs the
same per span whatever its size and the store's (within 2x: on a shared 2-core machine
single figures move by a third either way).

``--live-metrics`` measures instead what the live critical-path metrics cost ingest:
``hoptrace collect --live-metrics`` against ``--no-live-metrics``, side by side,
``--repeat`` times in alternating order (so that other load on the machine falls on
both alike), each run sending ``--spans`` spans into a fresh store; printed: each
side's spans/s (median, min, max), the ratio of the medians and of each pair, and
how many traces the live side attributed (read from its /metrics). Target: live on
at least 0.9x the rate without it.

    python benchmarks/ingest.py [--spans 5000000] [--senders 4] [--window 500000]
                                [--skip-store | --store-only]
    python benchmarks/ingest.py --live-metrics [--spans 200000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from collector import SpanStore, free_port
from collector.store import span_row
from tracer import attributes as attrs
from tracer.spans.model import Span

PROTO = {"content-type": "application/x-protobuf"}


def make_batch(n: int) -> tuple[bytes, bytes]:
    """``n`` SDK spans encoded as one request whose trace ids start with a marker."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "bench"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    t = provider.get_tracer("bench")
    stages = ["gateway", "auth", "context", "inference", "postprocess"]
    while len(memory.get_finished_spans()) < n:
        with t.start_as_current_span("request", attributes={attrs.STAGE: "client"}):
            for stage in stages:
                with t.start_as_current_span(stage, attributes={attrs.STAGE: stage}):
                    with t.start_as_current_span("POST", kind=SpanKind.CLIENT):
                        pass
    request = encode_spans(list(memory.get_finished_spans())[:n])
    marker = os.urandom(8)
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                span.trace_id = marker + span.trace_id[8:]
    return request.SerializeToString(), marker


class Senders:
    """Threads that post every batch once (again after a 503/429) and note each ack."""

    def __init__(self, url: str, template: bytes, marker: bytes, batches: int, batch: int):
        self.url, self.template, self.marker = url, template, marker
        self.batches, self.batch = batches, batch
        self.acks: list[tuple[float, int]] = []
        self.refused = self.failed = self.rejected = 0
        self._numbers = itertools.count()
        self._lock = threading.Lock()

    def run(self, senders: int) -> None:
        threads = [threading.Thread(target=self._send) for _ in range(senders)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _send(self) -> None:
        with httpx.Client(timeout=60) as client:
            while (number := next(self._numbers)) < self.batches:
                body = self.template.replace(self.marker, struct.pack(">Q", number + 1))
                while True:
                    response = client.post(self.url, content=body, headers=PROTO)
                    if response.status_code in (429, 503):
                        with self._lock:
                            self.refused += 1
                        time.sleep(float(response.headers.get("retry-after", "1")))
                        continue
                    break
                now = time.perf_counter()
                with self._lock:
                    if response.status_code != 200:
                        self.failed += 1
                        continue
                    partial = ExportTraceServiceResponse.FromString(response.content)
                    self.rejected += partial.partial_success.rejected_spans
                    self.acks.append((now, self.batch))


def windows(acks: list[tuple[float, int]], start: float, size: int) -> list[tuple[float, float]]:
    """(start, end) times of each window of ``size`` acknowledged spans."""
    edges = []
    done = 0
    edge = start
    for when, n in sorted(acks):
        done += n
        if done >= size * (len(edges) + 1):
            edges.append((edge, when))
            edge = when
    return edges


class Collector:
    """Samples a process every 0.2 s: its peak RSS, and its CPU time over wall time
    (so a window's CPU per span can be read, which other load on the machine moves
    less than its wall rate)."""

    def __init__(self, pid: int):
        self.pid, self.peak_kib = pid, 0
        self.cpu: list[tuple[float, float]] = []  # (perf_counter, CPU seconds)
        self._tick = os.sysconf("SC_CLK_TCK")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                status = Path(f"/proc/{self.pid}/status").read_text()
                stat = Path(f"/proc/{self.pid}/stat").read_text()
            except OSError:
                return
            fields = stat.rsplit(")", 1)[1].split()
            self.cpu.append((time.perf_counter(), (int(fields[11]) + int(fields[12])) / self._tick))
            for line in status.splitlines():
                if line.startswith("VmRSS:"):
                    self.peak_kib = max(self.peak_kib, int(line.split()[1]))

    def cpu_at(self, when: float) -> float:
        """CPU seconds used by ``when`` (interpolated between samples)."""
        before = [c for c in self.cpu if c[0] <= when] or self.cpu[:1]
        after = [c for c in self.cpu if c[0] >= when] or self.cpu[-1:]
        (t0, c0), (t1, c1) = before[-1], after[0]
        return c0 if t1 == t0 else c0 + (c1 - c0) * (when - t0) / (t1 - t0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def start_collector(
    store: Path, live: bool, extra: list[str] | None = None
) -> tuple[subprocess.Popen, int]:
    """``hoptrace collect`` (with ``extra`` options) on a free port, answering /healthz."""
    port = free_port()
    command = [sys.executable, "-m", "tracer.cli", "collect", "--port", str(port)]
    command += ["--live-metrics" if live else "--no-live-metrics", "--store", str(store)]
    command += extra or []
    proc = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return proc, port
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                proc.kill()
                raise
            time.sleep(0.05)


def run_collector(args: argparse.Namespace, tmp: Path) -> None:
    template, marker = make_batch(args.batch)
    batches = -(-args.spans // args.batch)  # whole batches, at least --spans spans
    store = tmp / "spans.db"
    proc, port = start_collector(store, live=False)
    try:
        sampler = Collector(proc.pid)
        senders = Senders(
            f"http://127.0.0.1:{port}/v1/traces", template, marker, batches, args.batch
        )
        start = time.perf_counter()
        senders.run(args.senders)
        elapsed = time.perf_counter() - start
        sampler.stop()
        peak_mib = sampler.peak_kib / 1024
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    with SpanStore(store) as s:
        stored = s.count()
    sent = batches * args.batch
    edges = windows(senders.acks, start, args.window)
    rates = [args.window / (t1 - t0) for t0, t1 in edges]
    cpu_us = [(sampler.cpu_at(t1) - sampler.cpu_at(t0)) / args.window * 1e6 for t0, t1 in edges]
    print(
        f"sent:     {sent:,} spans in {batches:,} batches of {args.batch}, {args.senders} senders"
    )
    print(f"overall:  {sent / elapsed:,.0f} spans/s over {elapsed:.1f} s")
    print(f"{'window':>20}  {'spans/s':>9}  {'vs first':>8}  {'CPU us/span':>11}  {'vs first':>8}")
    for i, (rate, cpu) in enumerate(zip(rates, cpu_us, strict=True)):
        span = f"{i * args.window:,}-{(i + 1) * args.window:,}"
        print(
            f"{span:>20}  {rate:>9,.0f}  {rate / rates[0]:>8.2f}  {cpu:>11.1f}  {cpu / cpu_us[0]:>8.2f}"
        )
    ratios = [r / rates[0] for r in rates]
    print(
        f"windows vs first (spans/s): median {statistics.median(ratios):.2f}, "
        f"min {min(ratios):.2f}, max {max(ratios):.2f}; last {ratios[-1]:.2f}"
    )
    cpu_ratios = [c / cpu_us[0] for c in cpu_us]
    print(
        f"windows vs first (collector CPU per span): median {statistics.median(cpu_ratios):.2f}, "
        f"min {min(cpu_ratios):.2f}, max {max(cpu_ratios):.2f}; last {cpu_ratios[-1]:.2f}"
    )
    print(f"collector peak RSS: {peak_mib:,.0f} MiB; refused (503/429): {senders.refused}")
    lost = sent - stored
    print(
        f"stored:   {stored:,} (lost: {lost}, failed requests: {senders.failed}, "
        f"rejected spans: {senders.rejected})"
    )
    ok = rates[-1] >= 0.8 * rates[0] and lost == 0 and not senders.failed
    print(f"target: last window >= 80% of the first, none lost: {'PASS' if ok else 'FAIL'}")


def _attributed(port: int, deadline_s: float = 10.0) -> tuple[int, int]:
    """Traces the live side attributed and pending, once attribution is idle (or after
    ``deadline_s``)."""
    from prometheus_client.parser import text_string_to_metric_families

    last = -1
    end = time.monotonic() + deadline_s
    while True:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
        got = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }
        done = int(
            sum(v for (n, _), v in got.items() if n == "hoptrace_live_traces_attributed_total")
        )
        pending = int(got.get(("hoptrace_live_pending_traces", ()), 0))
        if done == last or time.monotonic() > end:
            return done, pending
        last = done
        time.sleep(1.5)


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(c) for c in text.split()]


def compare_live(args: argparse.Namespace, tmp: Path) -> None:
    """Ingest with live metrics on and off, interleaved."""
    template, marker = make_batch(args.batch)
    batches = -(-args.spans // args.batch)
    rates: dict[bool, list[float]] = {False: [], True: []}
    cpu_us: dict[bool, list[float]] = {False: [], True: []}  # the receiver's, per span
    live_cpu_us: list[float] = []  # the attribution process's, per span
    attributed: list[tuple[int, int]] = []
    for rep in range(args.repeat):
        for live in (False, True) if rep % 2 == 0 else (True, False):
            store = tmp / f"live-{rep}-{int(live)}.db"
            proc, port = start_collector(store, live)
            try:
                senders = Senders(
                    f"http://127.0.0.1:{port}/v1/traces", template, marker, batches, args.batch
                )
                workers = _children(proc.pid)
                cpu0 = _cpu_s(proc.pid)
                live0 = sum(map(_cpu_s, workers))
                start = time.perf_counter()
                senders.run(args.senders)
                rates[live].append(batches * args.batch / (time.perf_counter() - start))
                cpu_us[live].append((_cpu_s(proc.pid) - cpu0) / (batches * args.batch) * 1e6)
                if live:
                    attributed.append(_attributed(port))
                    live_s = sum(map(_cpu_s, workers)) - live0
                    live_cpu_us.append(live_s / (batches * args.batch) * 1e6)
            finally:
                proc.terminate()
                proc.wait(timeout=60)
            store.unlink(missing_ok=True)
    traces_per_run = batches * args.batch // 11  # the template's traces are 11 spans each
    print(
        f"ingest, {batches * args.batch:,} spans a run in batches of {args.batch}, "
        f"{args.senders} senders, {args.repeat} interleaved runs a side:"
    )
    for live in (False, True):
        r = rates[live]
        print(
            f"  live metrics {'on ' if live else 'off'}: median {statistics.median(r):>9,.0f} spans/s "
            f"(min {min(r):,.0f}, max {max(r):,.0f})"
        )
    for live in (False, True):
        c = cpu_us[live]
        print(
            f"  receiver CPU per span, live {'on ' if live else 'off'}: median "
            f"{statistics.median(c):.1f} us (min {min(c):.1f}, max {max(c):.1f})"
        )
    print(
        f"  attribution process CPU per span: median {statistics.median(live_cpu_us):.1f} us "
        f"(min {min(live_cpu_us):.1f}, max {max(live_cpu_us):.1f}; runs at nice 10)"
    )
    pairs = [on / off for on, off in zip(rates[True], rates[False], strict=True)]
    ratio = statistics.median(rates[True]) / statistics.median(rates[False])
    print(f"  on / off: {ratio:.2f}x (medians); pairs: {', '.join(f'{p:.2f}' for p in pairs)}")
    for done, pending in attributed:
        print(
            f"  live side attributed {done:,} of ~{traces_per_run:,} traces ({pending} still pending)"
        )
    print(f"target: live metrics on >= 0.9x the rate without: {'PASS' if ratio >= 0.9 else 'FAIL'}")


def _rows(first: int, n: int) -> list[tuple]:
    return [
        span_row(
            Span(f"{(first + i) // 8 + 1:032x}", f"{first + i + 1:016x}", None, "bench", "op", 1,
                 1_700_000_000_000_000_000, 1_700_000_000_000_900_000, "inference", 1, None,
                 {attrs.STAGE: "inference", "http.request.method": "POST"})
        )
        for i in range(n)
    ]  # fmt: skip


def run_store(tmp: Path) -> None:
    """Cost per span of write_rows: into a small store and into one of 600,000 spans, in
    batches of 512 and in one commit of 100,000 or 300,000; interleaved, so that other
    load on the machine falls on all of them alike; medians of three rounds."""
    first = 0

    def timed(store: SpanStore, n: int, times: int = 1) -> float:
        nonlocal first
        rows = _rows(first, n * times)
        first += n * times
        start = time.perf_counter()
        for i in range(times):
            store.write_rows(rows[i * n : (i + 1) * n])
        return (time.perf_counter() - start) / (n * times) * 1e6

    costs: dict[str, list[float]] = {}
    with (
        SpanStore(tmp / "small.db", create=True) as small,
        SpanStore(tmp / "full.db", create=True) as full,
    ):
        for _ in range(600_000 // 512):
            timed(full, 512)
        for _ in range(3):
            for label, store, n, times in (
                ("512 into a small store", small, 512, 20),
                ("512 after 600,000", full, 512, 20),
                ("one commit of 100,000 after", full, 100_000, 1),
                ("one commit of 300,000 after", full, 300_000, 1),
            ):
                costs.setdefault(label, []).append(timed(store, n, times))
    medians = {label: statistics.median(c) for label, c in costs.items()}
    base = medians["512 into a small store"]
    print("store alone (write_rows, us per span, median of 3 interleaved rounds):")
    for label, cost in medians.items():
        print(f"  {label:<30} {cost:6.2f}  ({cost / base:.2f}x)")
    ok = max(medians.values()) <= 2 * base
    print(
        "target: the same per span whatever the size of the commit and of the store "
        f"(within 2x; the quadratic eviction made it 50x): {'PASS' if ok else 'FAIL'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=5_000_000)
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--window", type=int, default=500_000)
    parser.add_argument("--skip-store", action="store_true", help="only the collector run")
    parser.add_argument("--store-only", action="store_true", help="only the store alone")
    parser.add_argument(
        "--live-metrics", action="store_true", help="ingest with live metrics on against off"
    )
    parser.add_argument("--repeat", type=int, default=5, help="runs a side (--live-metrics)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.live_metrics:
            compare_live(args, Path(tmp))
            return
        if not args.store_only:
            run_collector(args, Path(tmp))
        if not args.skip_store:
            run_store(Path(tmp))


if __name__ == "__main__":
    main()
