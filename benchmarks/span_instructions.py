"""Instructions per request that tracing adds to one instrumented piece, under callgrind.

Instruction counts do not depend on what else runs on the machine, so they compare
before and after a change where CPU time on a shared machine cannot. Each scenario runs
in one process, traced (an SDK provider, spans queued by the batch processor of
``protocol="http/json"`` and never sent) and untraced (OpenTelemetry's no-op provider,
as ``OTEL_SDK_DISABLED=true`` gives), twice each under ``valgrind --tool=callgrind``
with N1 and N2 requests; (I2 - I1) / (N2 - N1) is the count per request, start-up left
out. Scenarios:

- ``server``: a FastAPI app instrumented by ``tracer.instrument_fastapi`` streams ten
  chunks (one SERVER span per request);
- ``client``: an ``instrument_httpx`` AsyncClient on an in-process transport streams
  eight chunks (one CLIENT span with its first-token mark);
- ``span``: ``start_span("s").end()`` of hoptrace's tracer, the SDK's floor in
  hoptrace's configuration (sampler, processors);
- ``stage``: a ``@tracer.stage`` coroutine, a ``with tracer.stage(...)`` block, and a
  ``@tracer.stage`` async generator of eight items (first-token mark), as the demo's
  app and model use them.

    python benchmarks/span_instructions.py [--scenario server,client,span,stage] [--n1 100 --n2 600] [--jobs 1]

Needs valgrind. One scenario at N2 = 600 takes a minute or two.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

_SCOPE = {
    "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
    "scheme": "http", "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
    "query_string": b"", "root_path": "", "client": ("127.0.0.1", 50000),
    "server": ("127.0.0.1", 8000),
    "headers": [(b"host", b"127.0.0.1:8000"), (b"user-agent", b"python-httpx/0.28.1"),
                (b"content-type", b"application/json"), (b"content-length", b"8"),
                (b"traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")],
}  # fmt: skip


def _provider(traced: bool, exporter: Any = None, batching: dict[str, str] | None = None) -> None:
    """hoptrace's setup (``exporter``, else an OTLP JSON one to a closed port) or the
    no-op provider; ``batching`` the ``OTEL_BSP_*`` settings, by default ones that keep
    every span queued (nothing is sent in the run)."""
    import tracer
    from tracer.sdk.json_export import JsonSpanExporter

    os.environ.update(
        batching
        or {
            "OTEL_BSP_SCHEDULE_DELAY": "3600000",
            "OTEL_BSP_MAX_QUEUE_SIZE": "100000",
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "100000",
        }
    )
    if traced:
        tracer.setup("bench", exporter=exporter or JsonSpanExporter("http://127.0.0.1:9/v1/traces"))
    else:
        tracer.setup("bench", disabled=True)


def _server(n: int) -> None:
    from fastapi import FastAPI
    from fastapi.responses import StreamingResponse

    import tracer
    from tracer.testing import call_asgi

    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat() -> StreamingResponse:
        async def body() -> Any:
            for _ in range(10):
                yield b"data: x\n\n"

        return StreamingResponse(body(), media_type="text/event-stream")

    tracer.instrument_fastapi(app, stage="inference")

    async def run() -> None:
        for _ in range(n):
            await call_asgi(app, _SCOPE, b'{"a": 1}')

    asyncio.run(run())


def _client(n: int) -> None:
    import httpx

    import tracer

    class Body(httpx.AsyncByteStream):
        async def __aiter__(self) -> Any:
            for _ in range(8):
                yield b"data: x\n\n"

    class Transport(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            await request.aread()
            headers = [(b"content-type", b"text/event-stream"), (b"server", b"uvicorn")]
            return httpx.Response(200, headers=headers, stream=Body())

    client = tracer.instrument_httpx(httpx.AsyncClient(transport=Transport()))

    async def run() -> None:
        for _ in range(n):
            async with client.stream("POST", "http://127.0.0.1:8001/generate", json={}) as r:
                async for _ in r.aiter_raw():
                    pass

    asyncio.run(run())


def _span(n: int) -> None:
    from opentelemetry import trace

    t = trace.get_tracer("bench")
    for _ in range(n):
        t.start_span("s").end()


def _stage(n: int) -> None:
    import tracer

    @tracer.stage("auth")
    async def auth() -> None:
        pass

    @tracer.stage("inference", span_name="generate m", **tracer.genai_request("chat", "m"))
    async def generate() -> Any:
        for i in range(8):
            yield i

    async def run() -> None:
        for _ in range(n):
            await auth()
            with tracer.stage("context"):
                pass
            async for _ in generate():
                pass

    asyncio.run(run())


def _count(scenario: str, traced: bool, n: int) -> int:
    cmd = [
        "valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
        __file__, "--run", scenario, "--traced" if traced else "--untraced", "--requests", str(n),
    ]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stderr
    found = re.search(r"Collected : (\d+)", out)
    if found is None:
        raise SystemExit(f"callgrind printed no count for {scenario}: {out[-500:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="server,client,span,stage")
    parser.add_argument("--n1", type=int, default=100)
    parser.add_argument("--n2", type=int, default=600)
    parser.add_argument("--jobs", type=int, default=2, help="callgrind processes at once")
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--untraced", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--requests", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:  # one measured process
        _provider(args.traced)
        scenarios = {"server": _server, "client": _client, "span": _span, "stage": _stage}
        scenarios[args.run](args.requests)
        return
    print("k instructions per request (callgrind): traced, untraced, added by tracing")
    for scenario in args.scenario.split(","):
        per = {}
        for traced in (True, False):
            with ThreadPoolExecutor(args.jobs) as pool:
                i1, i2 = pool.map(
                    lambda n, s=scenario, t=traced: _count(s, t, n), (args.n1, args.n2)
                )
            per[traced] = (i2 - i1) / (args.n2 - args.n1) / 1000
        added = per[True] - per[False]
        print(f"{scenario:<8}{per[True]:>10.1f}{per[False]:>10.1f}{added:>10.1f}", flush=True)


if __name__ == "__main__":
    main()
