"""A store that runs for weeks: ingest while retention drops old data, and reads whose
cost follows what they read, not what is stored.

``ingest``: a ``hoptrace collect`` process on loopback takes ``--spans`` spans from
``--senders`` threads (OTLP protobuf batches of 506 spans, 46 whole traces of 11 spans,
as BatchSpanProcessors send them; 503 is honoured and sent again), once with
``--max-store-size`` well below what is sent, once without a limit, ``--repeat`` times
in alternating order (so that other load on the machine falls on both alike). Printed
per side: ack latency P50 and P99 of every request (median over repetitions, with
min..max), spans/s, the largest store file sampled from /healthz every 0.25 s against
the limit plus one partition, and, read back after each run: every stored trace whole,
every acknowledged batch stored unless retention removed it whole, and removal in
arrival order (no batch acknowledged after the oldest kept one is missing).

Targets: retention's P50 and P99 within 2x of no retention; the file within the limit
plus one partition (1/16 of it); nothing lost that retention did not remove whole.

``reads``: a store of ``--hours`` hours of traffic (``--spans-per-hour``, one trace of
11 spans every few ms, across the runs ``load-0`` .. ``load-5``), written as the
collector writes, and a store holding only its last 15 minutes. Printed, as medians of
``--repeat`` interleaved runs of each ``hoptrace`` command in its own process (time,
peak RSS): ``analyze --since 15m`` on the big store against ``analyze`` on the small
one, ``runs --since 15m`` likewise, ``runs`` of the whole big store (its memory), one
trace by id on each, and ``analyze`` of the small store against the same spans as an
OTLP JSON-lines file, with the analyzer's workers and with one each
(``HOPTRACE_WORKERS=1``). Targets: the big store's reads of 15 minutes within 2x of the
small store's; ``runs`` of everything within the analyzer's 256 MiB; the store within
1.2x of the file.

    python benchmarks/store_retention.py ingest [--spans 2000000] [--limit 128MiB]
        [--senders 4] [--repeat 3]
    python benchmarks/store_retention.py reads [--hours 8] [--spans-per-hour 400000]
        [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import PROTO, make_batch, start_collector  # noqa: E402

from collector import SpanStore  # noqa: E402
from collector.memory import parse_size  # noqa: E402
from collector.store import span_row  # noqa: E402
from demo_app.chain import stop_on_signals  # noqa: E402
from tracer import attributes as attrs  # noqa: E402
from tracer.spans.model import Span  # noqa: E402

SPANS_PER_TRACE = 11
BATCH = 506  # 46 whole traces of make_batch's shape
MiB = 1024 * 1024


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):8.2f} ({min(values):.2f}..{max(values):.2f})"


class _Senders:
    """Threads that post every batch once (again after 503) and note each ack's time and
    latency (from the first try to the 200)."""

    def __init__(self, url: str, template: bytes, marker: bytes, batches: int):
        self.url, self.template, self.marker, self.batches = url, template, marker, batches
        self.acks: dict[int, float] = {}
        self.latency_s: list[float] = []
        self.failed = 0
        self._next = 0
        self._lock = threading.Lock()

    def _take(self) -> int | None:
        with self._lock:
            if self._next >= self.batches:
                return None
            self._next += 1
            return self._next - 1

    def run(self, senders: int) -> None:
        threads = [threading.Thread(target=self._send) for _ in range(senders)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _send(self) -> None:
        with httpx.Client(timeout=60) as client:
            while (number := self._take()) is not None:
                body = self.template.replace(self.marker, number.to_bytes(8, "big"))
                began = time.perf_counter()
                while True:
                    try:
                        response = client.post(self.url, content=body, headers=PROTO)
                    except httpx.TransportError:  # the collector is gone (a stopped run)
                        with self._lock:
                            self.failed += 1
                        return
                    if response.status_code not in (429, 503):
                        break
                    time.sleep(float(response.headers.get("retry-after", "1")))
                done = time.perf_counter()
                with self._lock:
                    if response.status_code != 200:
                        self.failed += 1
                        continue
                    self.acks[number] = done
                    self.latency_s.append(done - began)


def _sample_sizes(port: int, stop: threading.Event, out: list[tuple[int, int]]) -> None:
    with httpx.Client(timeout=5) as client:
        while not stop.wait(0.25):
            try:
                health = client.get(f"http://127.0.0.1:{port}/healthz").json()
            except httpx.HTTPError:
                continue
            out.append((health["store_file_bytes"], health["store_bytes"]))


def _ingest_once(args: argparse.Namespace, tmp: Path, limit: int | None) -> dict:
    template, marker = make_batch(BATCH)
    batches = -(-args.spans // BATCH)
    store = tmp / f"{'limited' if limit else 'unlimited'}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(str(store) + suffix).unlink(missing_ok=True)
    extra = ["--max-store-size", str(limit)] if limit else []
    proc, port = start_collector(store, live=False, extra=extra)
    sizes: list[tuple[int, int]] = []
    stop = threading.Event()
    sampler = threading.Thread(target=_sample_sizes, args=(port, stop, sizes), daemon=True)
    try:
        sampler.start()
        senders = _Senders(f"http://127.0.0.1:{port}/v1/traces", template, marker, batches)
        start = time.perf_counter()
        senders.run(args.senders)
        elapsed = time.perf_counter() - start
        health = httpx.get(f"http://127.0.0.1:{port}/healthz").json()
    finally:
        stop.set()
        sampler.join()
        proc.terminate()
        proc.wait(timeout=60)
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        per_trace = db.execute(
            "SELECT substr(trace_id, 1, 16), COUNT(*) FROM spans GROUP BY trace_id"
        ).fetchall()
    traces_per_batch = BATCH // SPANS_PER_TRACE
    kept: dict[int, int] = {}
    partial = 0
    for prefix, count in per_trace:
        kept[int(prefix, 16)] = kept.get(int(prefix, 16), 0) + 1
        partial += count != SPANS_PER_TRACE
    partial += sum(1 for n in kept.values() if n != traces_per_batch)
    missing = set(senders.acks) - set(kept)
    oldest_kept = min((senders.acks[b] for b in kept if b in senders.acks), default=0.0)
    # A batch acknowledged after the oldest kept one arrived later: it must be there.
    out_of_order = sum(1 for b in missing if senders.acks[b] > oldest_kept + 0.05)
    return {
        "p50_ms": _pct(senders.latency_s, 0.5) * 1e3,
        "p99_ms": _pct(senders.latency_s, 0.99) * 1e3,
        "rate": batches * BATCH / elapsed,
        "max_file": max((f for f, _ in sizes), default=0),
        "max_total": max((t for _, t in sizes), default=0),
        "removed": health["retention_spans_removed"],
        "slowest_removal_s": health["retention_slowest_removal_s"],
        "slowest_index_s": health["store_slowest_index_s"],
        "partial": partial,
        "missing": len(missing),
        "out_of_order": out_of_order,
        "failed": senders.failed,
        "acked": len(senders.acks),
    }


def run_ingest(args: argparse.Namespace, tmp: Path) -> None:
    limit = parse_size(args.limit, "--limit")
    print(
        f"{args.spans:,} spans per run in batches of {BATCH} from {args.senders} senders; "
        f"retention side: --max-store-size {args.limit}; {args.repeat} repetitions, "
        "alternating order"
    )
    results: dict[str, list[dict]] = {"retention": [], "none": []}
    for rep in range(args.repeat):
        order = [("retention", limit), ("none", None)]
        for side, lim in order if rep % 2 == 0 else order[::-1]:
            result = _ingest_once(args, tmp, lim)
            results[side].append(result)
            print(
                f"  run {rep + 1} {side:<9}: P50 {result['p50_ms']:6.1f} ms  P99 "
                f"{result['p99_ms']:7.1f} ms  {result['rate']:8,.0f} spans/s  largest file "
                f"{result['max_file'] / MiB:7.1f} MiB (with log {result['max_total'] / MiB:.1f})"
                f"  removed {result['removed']:,} spans (slowest drop "
                f"{result['slowest_removal_s'] * 1e3:.0f} ms, slowest index "
                f"{result['slowest_index_s'] * 1e3:.0f} ms)  partial traces "
                f"{result['partial']}  missing {result['missing']:,} (after the oldest kept: "
                f"{result['out_of_order']})  failed {result['failed']}",
                flush=True,
            )
    ratios = {
        key: [r[key] / n[key] for r, n in zip(results["retention"], results["none"], strict=True)]
        for key in ("p50_ms", "p99_ms", "rate")
    }
    print("retention / none, per pair: median (min..max)")
    for key, label in (("p50_ms", "ack P50"), ("p99_ms", "ack P99"), ("rate", "spans/s")):
        print(f"  {label:<8} {_spread(ratios[key])}")
    bound = limit * (1 + 1 / 16)
    largest = max(r["max_file"] for r in results["retention"])
    lost = sum(
        r["out_of_order"] + r["partial"] + r["failed"] for side in results.values() for r in side
    )
    lost += sum(r["missing"] for r in results["none"])
    ok_latency = max(statistics.median(ratios["p50_ms"]), statistics.median(ratios["p99_ms"])) <= 2
    print(
        f"largest file with retention: {largest / MiB:.1f} MiB; limit plus one partition "
        f"{bound / MiB:.1f} MiB"
    )
    print(f"target: ack P50 and P99 within 2x of no retention: {'PASS' if ok_latency else 'FAIL'}")
    print(
        f"target: the file within the limit plus one partition: {'PASS' if largest <= bound else 'FAIL'}"
    )
    print(f"target: nothing lost but whole, oldest first: {'PASS' if not lost else 'FAIL'}")


def _trace_rows(n: int, start_ns: int) -> list[tuple]:
    trace_id = f"{n:032x}"
    run = f"load-{n % 6}"
    rows = [
        span_row(
            Span(
                trace_id,
                f"{n:08x}00000001",
                None,
                "client",
                "request",
                2,
                start_ns,
                start_ns + 40_000_000,
                "client",
                1,
                None,
                {attrs.STAGE: "client", attrs.RUN: run, "http.route": "/chat"},
            )
        )
    ]
    for i, stage in enumerate(("gateway", "auth", "context", "inference", "postprocess"), 1):
        at = start_ns + i * 1_000_000
        for k, (svc, kind) in enumerate((("client", 3), (stage, 2))):
            rows.append(
                span_row(
                    Span(
                        trace_id,
                        f"{n:08x}{2 * i + k:08x}",
                        rows[0][1],
                        svc,
                        f"POST /{stage}",
                        kind,
                        at + k * 100_000,
                        at + 5_000_000 - k * 100_000,
                        stage,
                        1,
                        None,
                        {attrs.STAGE: stage, "http.request.method": "POST"},
                    )
                )
            )
    return rows


def _build(path: Path, hours: float, per_hour: int, now_ns: int, only_last_s: float | None) -> int:
    """Write ``hours`` of traffic ending at ``now_ns`` (only its last ``only_last_s``),
    partitioned as the collector would by arrival time; returns spans written."""
    traces = int(hours * per_hour / SPANS_PER_TRACE)
    step_ns = int(hours * 3600e9 / traces)
    first_ns = now_ns - traces * step_ns
    written = 0
    with SpanStore(path, create=True) as store:
        rows: list[tuple] = []
        for n in range(traces):
            start = first_ns + n * step_ns
            if only_last_s is not None and start < now_ns - only_last_s * 1e9:
                continue
            rows += _trace_rows(n + 1, start)
            if len(rows) >= 50_000:
                written += store.write_rows(rows)
                store.maintain(now_ns=start)
                rows = []
        written += store.write_rows(rows)
    return written


def _otlp_lines(store: Path, out: Path) -> None:
    """The spans of ``store`` as OTLP JSON lines, one trace per line."""
    import orjson

    with SpanStore(store, read_only=True) as read, open(out, "wb") as fh:
        trace: list[Span] = []
        for span in read.iter_spans():
            if trace and span.trace_id != trace[0].trace_id:
                fh.write(orjson.dumps(_otlp(trace)) + b"\n")
                trace = []
            trace.append(span)
        if trace:
            fh.write(orjson.dumps(_otlp(trace)) + b"\n")


def _otlp(spans: list[Span]) -> dict:
    by_service: dict[str, list[dict]] = {}
    for s in spans:
        by_service.setdefault(s.service, []).append(
            {
                "traceId": s.trace_id, "spanId": s.span_id, "parentSpanId": s.parent_id or "",
                "name": s.name, "kind": s.kind, "startTimeUnixNano": str(s.start_ns),
                "endTimeUnixNano": str(s.end_ns), "status": {"code": s.status},
                "attributes": [{"key": k, "value": {"stringValue": str(v)}}
                               for k, v in s.attributes.items()],
            }
        )  # fmt: skip
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": n}}]},
                "scopeSpans": [{"spans": group}],
            }
            for n, group in by_service.items()
        ]
    }


def _measure(command: list[str]) -> tuple[float, float]:
    """(seconds, peak RSS MiB) of ``command`` in its own process."""
    # /usr/bin/time: a child forked from this process would count this one's pages.
    began = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *command], stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    took = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr[-500:]}")
    return took, int(done.stderr.strip().splitlines()[-1]) / 1024


def run_reads(args: argparse.Namespace, tmp: Path) -> None:
    now_ns = time.time_ns()
    big, small, lines = tmp / "big.db", tmp / "last15.db", tmp / "last15.jsonl"
    began = time.perf_counter()
    n_big = _build(big, args.hours, args.spans_per_hour, now_ns, None)
    n_small = _build(small, args.hours, args.spans_per_hour, now_ns, 900)
    _otlp_lines(small, lines)
    print(
        f"big store: {n_big:,} spans over {args.hours:g} h, {big.stat().st_size / MiB:,.0f} MiB; "
        f"last 15 minutes: {n_small:,} spans, {small.stat().st_size / MiB:,.0f} MiB "
        f"(built in {time.perf_counter() - began:.0f} s)"
    )
    with SpanStore(small, read_only=True) as s:
        one = next(s.iter_spans()).trace_id
    cli = [sys.executable, "-m", "tracer.cli"]
    serial = ["env", "HOPTRACE_WORKERS=1", *cli]
    by_id = [sys.executable, "-c",
             "import sys; from collector import SpanStore; "
             "s = SpanStore(sys.argv[1], read_only=True); "
             "assert len(list(s.spans_of([sys.argv[2]]))) == 11"]  # fmt: skip
    pairs = [
        ("analyze --since 15m", cli + ["analyze", str(big), "--since", "15m", "--format", "json"],
         cli + ["analyze", str(small), "--format", "json"]),
        ("runs --since 15m", cli + ["runs", str(big), "--since", "15m"], cli + ["runs", str(small)]),
        ("one trace by id", by_id + [str(big), one], by_id + [str(small), one]),
        ("runs (everything)", cli + ["runs", str(big)], cli + ["runs", str(small)]),
        ("analyze: store vs file", cli + ["analyze", str(small), "--format", "json"],
         cli + ["analyze", str(lines), "--format", "json"]),
        ("analyze, one worker each", serial + ["analyze", str(small), "--format", "json"],
         serial + ["analyze", str(lines), "--format", "json"]),
    ]  # fmt: skip
    times: dict[str, list[tuple[float, float, float, float]]] = {p[0]: [] for p in pairs}
    for rep in range(args.repeat):
        for label, first, second in pairs:
            if rep % 2:
                (t2, m2), (t1, m1) = _measure(second), _measure(first)
            else:
                (t1, m1), (t2, m2) = _measure(first), _measure(second)
            times[label].append((t1, m1, t2, m2))
    print(f"medians of {args.repeat} interleaved runs, (min..max) of the per-run ratio:")
    print(
        f"{'':<24} {'big s':>7} {'MiB':>6} {'small s':>8} {'MiB':>6}   time ratio         memory ratio"
    )
    verdicts = []
    for label, rows in times.items():
        t1, m1, t2, m2 = (statistics.median(col) for col in zip(*rows, strict=True))
        tr, mr = [r[0] / r[2] for r in rows], [r[1] / r[3] for r in rows]
        print(f"{label:<24} {t1:7.2f} {m1:6.0f} {t2:8.2f} {m2:6.0f}   {_spread(tr)}  {_spread(mr)}")
        verdicts.append((label, statistics.median(tr), m1))
    for label, ratio, mem in verdicts:
        if label == "runs (everything)":
            print(f"target: runs of everything within 256 MiB: {'PASS' if mem <= 256 else 'FAIL'}")
        elif label in ("analyze: store vs file", "analyze, one worker each"):
            verdict = "PASS" if ratio <= 1.2 else "FAIL"
            print(f"target: {label}, the store within 1.2x of the file: {verdict}")
        else:
            print(
                f"target: {label} within 2x of the small store: {'PASS' if ratio <= 2 else 'FAIL'}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="part", required=True)
    ingest = sub.add_parser("ingest")
    ingest.add_argument("--spans", type=int, default=2_000_000)
    ingest.add_argument("--limit", default="128MiB")
    ingest.add_argument("--senders", type=int, default=4)
    ingest.add_argument("--repeat", type=int, default=3)
    reads = sub.add_parser("reads")
    reads.add_argument("--hours", type=float, default=8)
    reads.add_argument("--spans-per-hour", type=int, default=400_000)
    reads.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("HOPTRACE_BENCH_DIR")) as tmp:
        (run_ingest if args.part == "ingest" else run_reads)(args, Path(tmp))


if __name__ == "__main__":
    with stop_on_signals():  # SIGTERM stops the collector it started, as Ctrl-C does
        main()
