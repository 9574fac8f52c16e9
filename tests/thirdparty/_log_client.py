"""One openai client traced by ``opentelemetry-instrumentation-openai-v2`` with its
GenAI events emitted as OTLP log records, for ``test_genai_log_events.py``.

    python tests/thirdparty/_log_client.py BASE_URL OTLP_ENDPOINT [--requests N]

Spans go to ``OTLP_ENDPOINT/v1/traces``, the instrumentation's events (it emits
``gen_ai.client.inference.operation.details`` as a log record tied to its span when
``OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT=true``) to ``OTLP_ENDPOINT/v1/logs``, both
with the SDK's OTLP/HTTP exporters. Prints one JSON line per streamed request:
``{"trace_id": ..., "start_ns": ..., "first_chunk_ns": ..., "done_ns": ...}``.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import httpx
import openai
from opentelemetry import trace
from opentelemetry._logs import set_logger_provider
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

MODEL = "llama-3-8b"
CANARY = "PROMPT-CANARY-LOGS"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("base_url")
    ap.add_argument("otlp_endpoint")
    ap.add_argument("--requests", type=int, default=3)
    args = ap.parse_args()
    endpoint = args.otlp_endpoint.rstrip("/")
    resource = Resource.create({"service.name": "llm-client"})
    tracers = TracerProvider(resource=resource)
    tracers.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint + "/v1/traces"))
    )
    trace.set_tracer_provider(tracers)
    loggers = LoggerProvider(resource=resource)
    loggers.add_log_record_processor(
        SimpleLogRecordProcessor(OTLPLogExporter(endpoint=endpoint + "/v1/logs"))
    )
    set_logger_provider(loggers)
    OpenAIInstrumentor().instrument(tracer_provider=tracers, logger_provider=loggers)
    http_client: Any = httpx.Client(timeout=30.0)
    client = openai.OpenAI(
        base_url=args.base_url, api_key="sk-test", http_client=http_client, max_retries=0
    )
    tracer = tracers.get_tracer("llm-client")
    for i in range(args.requests):
        with tracer.start_as_current_span("ask") as root:
            start_ns = time.time_ns()
            first_chunk_ns = None
            stream = client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": f"{CANARY} {i}: say hello."}],
                stream=True,
                stream_options={"include_usage": True},
                max_tokens=6,
            )
            for _chunk in stream:
                if first_chunk_ns is None:
                    first_chunk_ns = time.time_ns()
            done_ns = time.time_ns()
        trace_id = f"{root.get_span_context().trace_id:032x}"
        line = {"trace_id": trace_id, "start_ns": start_ns, "first_chunk_ns": first_chunk_ns}
        print(json.dumps({**line, "done_ns": done_ns}), flush=True)
    tracers.force_flush()
    loggers.force_flush()
    tracers.shutdown()
    loggers.shutdown()


if __name__ == "__main__":
    main()
