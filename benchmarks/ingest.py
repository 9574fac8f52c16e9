"""Ingest rate of ``hoptrace collect`` fed by the real OTLP/HTTP exporter.

Spans are made once (an SDK provider into memory), then sent by the official
``OTLPSpanExporter`` in batches of 512 from several threads, as BatchSpanProcessors
in several services would, to a ``hoptrace collect`` process. The clock stops when
the last batch is answered (the receiver answers after commit); then the store is
counted. Printed beside it: the time the same payloads take just to decode
(protobuf parse), and the ratio. Target: >= 20,000 spans/s stored, none lost.

    python benchmarks/ingest.py [--spans 200000] [--senders 4]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from collector import SpanStore, free_port
from tracer import attributes as attrs

BATCH = 512


def make_spans(n: int) -> list:
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
    return list(memory.get_finished_spans())[:n]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument("--senders", type=int, default=4)
    args = parser.parse_args()

    print(f"making {args.spans:,} spans ...", file=sys.stderr)
    spans = make_spans(args.spans)
    batches = [spans[i : i + BATCH] for i in range(0, len(spans), BATCH)]
    payloads = [encode_spans(b).SerializeToString() for b in batches]

    start = time.perf_counter()
    for p in payloads:
        ExportTraceServiceRequest.FromString(p)
    decode_s = time.perf_counter() - start

    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "spans.db"
        port = free_port()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tracer.cli",
                "collect",
                "--port",
                str(port),
                "--store",
                str(store),
            ],
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            exporters = [
                OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces")
                for _ in range(args.senders)
            ]

            def send(job: tuple[int, list]) -> SpanExportResult:
                n, batch = job
                return exporters[n % args.senders].export(batch)

            start = time.perf_counter()
            with ThreadPoolExecutor(args.senders) as pool:
                results = list(pool.map(send, enumerate(batches)))
            ingest_s = time.perf_counter() - start
        finally:
            proc.terminate()
            proc.wait(timeout=20)
        with SpanStore(store) as s:
            stored = s.count()
    failed = sum(r != SpanExportResult.SUCCESS for r in results)
    rate = stored / ingest_s
    print(
        f"spans sent:              {len(spans):,} in {len(batches)} batches of {BATCH}, {args.senders} senders"
    )
    print(
        f"stored:                  {stored:,} (lost: {len(spans) - stored}, failed exports: {failed})"
    )
    print(f"ingest (export->commit): {ingest_s:.2f} s = {rate:,.0f} spans/s")
    print(f"decode only (protobuf):  {decode_s:.2f} s = {len(spans) / decode_s:,.0f} spans/s")
    print(f"ratio ingest/decode:     {ingest_s / decode_s:.1f}x")
    ok = rate >= 20_000 and stored == len(spans)
    print(f"target >= 20,000 spans/s stored, none lost: {'PASS' if ok else 'FAIL'}")


if __name__ == "__main__":
    main()
