"""One traced openai client process for ``test_openai_instrumentations.py``.

    python tests/thirdparty/_client.py LIB BASE_URL API_KEY OTLP_ENDPOINT RUN [--requests N]

LIB is ``openllmetry``, ``openinference`` or ``openai-v2``. The process sets up an
OpenTelemetry SDK provider (service ``llm-client``, batch export over OTLP/HTTP
protobuf to ``OTLP_ENDPOINT/v1/traces``), instruments the openai SDK with that
library and an ``httpx.Client`` with opentelemetry-instrumentation-httpx, makes N
streamed chat completions one after the other, and prints one JSON line per request:

    {"i": 0, "trace_id": "...", "start_ns": ..., "first_content_ns": ...,
     "first_chunk_ns": ..., "done_ns": ..., "chunks": [...], "text": "..."}

then a last line ``{"summary": ...}`` with what the process itself exported (span
names per trace, whether the prompt canary was in an exported attribute). Each library
runs in its own process: their patches and the global provider are process-wide.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import httpx
import openai
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

LIBS = ("openllmetry", "openinference", "openai-v2")
SERVICE = "llm-client"
MODEL = "llama-3-8b"


def canary(lib: str) -> str:
    """The prompt text that must never reach the span store."""
    return f"PROMPT-CANARY-{lib}"


class Recorder(SpanProcessor):
    """Remembers, for the request under way, the traces its spans started in, and after
    the fact which exported attribute values held the canary."""

    def __init__(self, needle: str):
        self.needle = needle
        self.label: int | None = None
        self.roots: dict[int, list[str]] = {}
        self.names: dict[str, list[str]] = {}
        self.canary_keys: set[str] = set()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        ctx = span.get_span_context()
        if span.parent is None and self.label is not None:
            self.roots.setdefault(self.label, []).append(f"{ctx.trace_id:032x}")

    def on_end(self, span: ReadableSpan) -> None:
        tid = f"{span.context.trace_id:032x}"
        self.names.setdefault(tid, []).append(span.name)
        for key, value in (span.attributes or {}).items():
            if self.needle in str(value):
                self.canary_keys.add(key)
        for event in span.events:
            for key, value in (event.attributes or {}).items():
                if self.needle in str(value):
                    self.canary_keys.add(f"event {event.name}: {key}")

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def instrumentor(lib: str) -> Any:
    if lib == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor

        return OpenAIInstrumentor()
    if lib == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor as OIInstrumentor

        return OIInstrumentor()
    if lib == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as V2Instrumentor

        return V2Instrumentor()
    raise SystemExit(f"unknown library {lib!r}; one of {', '.join(LIBS)}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("lib", choices=LIBS)
    ap.add_argument("base_url")
    ap.add_argument("api_key")
    ap.add_argument("otlp_endpoint")
    ap.add_argument("run")
    ap.add_argument("--requests", type=int, default=6)
    args = ap.parse_args()

    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    recorder = Recorder(canary(args.lib))
    provider.add_span_processor(recorder)
    provider.add_span_processor(
        BatchSpanProcessor(
            OTLPSpanExporter(endpoint=args.otlp_endpoint.rstrip("/") + "/v1/traces"),
            schedule_delay_millis=100,
        )
    )
    trace.set_tracer_provider(provider)
    instrumentor(args.lib).instrument(tracer_provider=provider)

    # openai 3.x types http_client as httpx2.Client but takes a legacy httpx.Client too.
    http_client: Any = httpx.Client(timeout=30.0)
    HTTPXClientInstrumentor().instrument_client(http_client, tracer_provider=provider)
    client = openai.OpenAI(
        base_url=args.base_url, api_key=args.api_key, http_client=http_client, max_retries=0
    )
    messages: Any = [
        {"role": "system", "content": "You answer briefly."},
        {"role": "user", "content": f"{canary(args.lib)} run {args.run}: say hello."},
    ]
    for i in range(args.requests):
        recorder.label = i
        chunks: list[dict[str, Any]] = []
        first_content_ns = first_chunk_ns = None
        text = ""
        start_ns = time.time_ns()
        stream = client.chat.completions.create(
            model=MODEL,
            messages=messages,
            stream=True,
            max_tokens=8,
        )
        chunk: Any
        for chunk in stream:
            now = time.time_ns()
            if first_chunk_ns is None:
                first_chunk_ns = now
            delta = chunk.choices[0].delta if chunk.choices else None
            content = delta.content if delta is not None else None
            role = delta.role if delta is not None else None
            if content and first_content_ns is None:
                first_content_ns = now
            text += content or ""
            chunks.append({"t_ns": now, "content": bool(content), "role": role})
        done_ns = time.time_ns()
        recorder.label = None
        roots = recorder.roots.get(i, [])
        print(
            json.dumps(
                {
                    "i": i,
                    "trace_id": roots[0] if len(roots) == 1 else None,
                    "roots": roots,
                    "start_ns": start_ns,
                    "first_chunk_ns": first_chunk_ns,
                    "first_content_ns": first_content_ns,
                    "done_ns": done_ns,
                    "chunks": chunks,
                    "text": text,
                }
            ),
            flush=True,
        )
    client.close()
    provider.force_flush()
    provider.shutdown()
    summary = {
        "lib": args.lib,
        "span_names": recorder.names,
        "canary_keys": sorted(recorder.canary_keys),
    }
    print(json.dumps({"summary": summary}), flush=True)


if __name__ == "__main__":
    main()
