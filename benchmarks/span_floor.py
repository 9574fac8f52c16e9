"""The least CPU the demo chain's spans can cost, against issue 14's goals.

Each instrumented piece of the chain runs alone in a child process, with no network and
no framework around it beyond what the piece needs (``span_instructions.py``'s
scenarios): the FastAPI server span, the httpx client span, and three ``@stage`` spans
(``auth``, ``context`` and the streamed ``inference`` one with its first-token mark).
Traced runs use hoptrace's own setup (``protocol="http/json"``: its snapshot batch
processor) with an exporter that encodes every batch as the real one does and drops
the bytes instead of posting them, so the export thread's encoding is counted and the
network is not. Untraced runs install the no-op provider (``OTEL_SDK_DISABLED``).
CPU (user + system of the child, all its threads) is taken at two request counts and
subtracted, so start-up drops out; traced and untraced alternate, ``--rounds`` times.

The chain makes eleven spans a request: three server spans (gateway, app, model), two
client spans (gateway to app, app to model) and six stage spans (twice the stage
scenario). Their sum is the floor: what the same spans cost with nothing else going
on. The goals it is set against:

- concurrency 1: at most 0.1 ms a hop at P50, 0.3 ms a request over the three hops;
  at concurrency 1 the spans are made on the request path, so their CPU is latency;
- concurrency 8: at most 2% of throughput, with both cores busy: 2% of the CPU the
  untraced chain takes a request (its three services and the client, measured here
  on an untraced chain, ``--profile loopback`` as ``chain_overhead.py``).

With ``--sample-ratio 0.1`` the traced runs sample a tenth of their requests with the
consistent probability sampler (``OTEL_TRACES_SAMPLER=parentbased_traceidratio``): the
client and stage scenarios' requests are roots the sampler decides, the server
scenario's come from a caller that sampled one in ten (the rest unsampled, as the
chain's app and model see them), and the rows say what a sampled service's spans cost
on average.

    python benchmarks/span_floor.py [--rounds 5] [--n1 200 --n2 2200] [--chain-requests 600]
        [--sample-ratio 0.1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: Spans of each scenario in one chain request (see the module docstring).
PER_REQUEST = {"server": 3, "client": 2, "stage": 2}
HOPS = 3


def _replay(n: int, path: str) -> None:
    """The spans of one real chain request (``path``: their names, kinds, attributes,
    first-token marks and parents), made ``n`` times with the bare SDK: nested in their
    parents, no instrumentation, no framework."""
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, set_span_in_context

    spans = json.loads(Path(path).read_text())
    t = trace.get_tracer("bench")
    for _ in range(n):
        made: list[Any] = []
        for s in spans:  # parents before children
            parent = made[s["parent"]] if s["parent"] >= 0 else None
            span = t.start_span(
                s["name"],
                context=set_span_in_context(parent) if parent is not None else None,
                kind=SpanKind(max(s["kind"] - 1, 0)),  # OTLP numbers kinds from 1
                attributes=s["attributes"],
            )
            if s["mark"]:
                span.add_event("hoptrace.first_token")
            made.append(span)
        for span in reversed(made):
            span.end()


def _child(scenario: str, traced: bool, n: int, spans: str | None) -> None:
    """One measured process: the scenario ``n`` times, then every span exported."""
    sys.path.insert(0, str(HERE))
    import span_instructions as pieces

    import tracer
    from tracer.sdk.json_export import JsonSpanExporter

    class EncodeOnly(JsonSpanExporter):
        """Encodes each batch as the real exporter does; nothing is sent."""

        def _send(self, body: bytes) -> object:
            from opentelemetry.sdk.trace.export import SpanExportResult

            return SpanExportResult.SUCCESS

    # The SDK's default batching: batches of 512 are encoded as the run goes.
    batching = {
        "OTEL_BSP_SCHEDULE_DELAY": "5000",
        "OTEL_BSP_MAX_QUEUE_SIZE": "100000",
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "512",
    }
    pieces._provider(traced, EncodeOnly("http://127.0.0.1:9/v1/traces"), batching)
    if scenario == "server" and os.environ.get("OTEL_TRACES_SAMPLER") == "parentbased_traceidratio":
        _sampled_parents(float(os.environ.get("OTEL_TRACES_SAMPLER_ARG") or 1))
    scenarios = {
        "server": pieces._server,
        "client": pieces._client,
        "stage": pieces._stage,
        "span": lambda n: pieces._span(11 * n),  # a request's eleven
        "replay": lambda n: _replay(n, spans or ""),
    }
    scenarios[scenario](n)
    tracer.shutdown()  # the export thread encodes what is still queued


def _sampled_parents(ratio: float) -> None:
    """The server scenario's requests come from a sampled caller one time in
    ``1 / ratio`` and from an unsampled one otherwise, as the chain's app and model see
    them when the gateway samples ``ratio`` of the requests."""
    import itertools

    import tracer.testing as testing

    real, count = testing.call_asgi, itertools.count()
    every = max(1, round(1 / ratio)) if ratio > 0 else 0

    async def call(app: Any, scope: dict[str, Any], body: bytes) -> Any:
        flags = b"01" if every and next(count) % every == 0 else b"00"
        headers = [(k, v[:-2] + flags if k == b"traceparent" else v) for k, v in scope["headers"]]
        return await real(app, dict(scope, headers=headers), body)

    testing.call_asgi = call  # type: ignore[assignment]


def _cpu_ms(scenario: str, traced: bool, n: int, spans: str) -> float:
    """CPU ms (user + system) of one child process running ``n`` requests."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [sys.executable, __file__, "--run", scenario, "--traced" if traced else "--untraced",
         "--requests", str(n), "--spans", spans],
        check=True,
    )  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000


def _per_request(scenario: str, traced: bool, n1: int, n2: int, spans: str) -> float:
    return (_cpu_ms(scenario, traced, n2, spans) - _cpu_ms(scenario, traced, n1, spans)) / (n2 - n1)


def _chain_spans(out: Path) -> int:
    """Write the spans of one request of a traced chain (``--profile loopback``, spans
    to its embedded collector) to ``out`` for :func:`_replay`; returns their number."""
    from demo_app.chain import Chain
    from demo_app.overhead import stream_requests
    from tracer.analysis import load
    from tracer.analysis.model.prepare import prepare
    from tracer.spans.model import Warnings

    with tempfile.TemporaryDirectory(prefix="hoptrace-floor-") as tmp:
        store = Path(tmp) / "t.db"
        fast = {"OTEL_BSP_SCHEDULE_DELAY": "100"}
        with Chain(store, profile="loopback", env=fast) as chain:
            url = chain.base_url + "/chat/completions"
            asyncio.run(stream_requests(url, chain.api_key, 5, 1))
            deadline, last = time.monotonic() + 20, None
            while time.monotonic() < deadline:  # until the requests' traces stop growing
                traces = load([store]).traces
                sizes = sorted(len(v) for v in traces.values())
                if sizes and sizes == last and sizes.count(sizes[-1]) >= 5:
                    break
                last = sizes
                time.sleep(0.5)
    trace_id, spans = max(traces.items(), key=lambda kv: len(kv[1]))
    prepared = prepare(trace_id, spans, Warnings())
    if prepared is None:
        raise SystemExit("the chain's trace could not be read")
    real = len(prepared.spans) - prepared.synthetic  # not the engine sub-stages it adds
    spans = prepared.spans
    order = [i for i in prepared.order if i < real]
    where = {i: k for k, i in enumerate(order)}
    rows = [
        {
            "name": spans[i].name,
            "kind": spans[i].kind,
            "attributes": spans[i].attributes,
            "mark": spans[i].first_token_ns is not None,
            "parent": where[prepared.parent[i]] if prepared.parent[i] >= 0 else -1,
        }
        for i in order
    ]
    out.write_text(json.dumps(rows))
    return len(rows)


def _chain_cpu_ms(requests: int, concurrency: int) -> float:
    """CPU ms a request of an untraced chain's three services and the client."""
    from demo_app.chain import Chain
    from demo_app.overhead import services_cpu_s, stream_requests

    with tempfile.TemporaryDirectory(prefix="hoptrace-floor-") as tmp:
        with Chain(Path(tmp) / "u.db", profile="loopback", traced=False) as chain:
            url = chain.base_url + "/chat/completions"
            asyncio.run(stream_requests(url, chain.api_key, 50, concurrency))  # warm-up
            before = services_cpu_s(chain)
            mine = time.process_time()
            asyncio.run(stream_requests(url, chain.api_key, requests, concurrency))
            client = time.process_time() - mine
            after = services_cpu_s(chain)
    if before is None or after is None:
        raise SystemExit("the services' CPU time cannot be read (/proc)")
    services = after - before
    return (services + client) / requests * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n1", type=int, default=200)
    parser.add_argument("--n2", type=int, default=2200)
    parser.add_argument("--chain-requests", type=int, default=600)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--untraced", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--requests", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--spans", help=argparse.SUPPRESS)
    parser.add_argument("--sample-ratio", type=float, default=None)
    args = parser.parse_args()
    if args.run:
        _child(args.run, args.traced, args.requests, args.spans)
        return
    if args.sample_ratio is not None and not 0 <= args.sample_ratio <= 1:
        parser.error(f"--sample-ratio must be in 0..1, got {args.sample_ratio!r}")
    tmp = tempfile.TemporaryDirectory(prefix="hoptrace-floor-")
    spans = str(Path(tmp.name) / "spans.json")
    count = _chain_spans(Path(spans))  # every span of a request, unsampled
    if args.sample_ratio is not None:  # the measured children inherit it
        os.environ["OTEL_TRACES_SAMPLER"] = "parentbased_traceidratio"
        os.environ["OTEL_TRACES_SAMPLER_ARG"] = repr(args.sample_ratio)
        print(f"traced runs sample {args.sample_ratio:g} of their requests")
    print(
        f"CPU ms a request added by tracing, each piece alone in a process; {args.rounds} "
        f"rounds alternating traced and untraced, ({args.n2} - {args.n1}) requests each",
        flush=True,
    )
    added: dict[str, list[float]] = {s: [] for s in (*PER_REQUEST, "replay", "span")}
    for r in range(args.rounds):
        for scenario in added:
            order = (True, False) if r % 2 == 0 else (False, True)
            got = {t: _per_request(scenario, t, args.n1, args.n2, spans) for t in order}
            added[scenario].append(got[True] - got[False])
        print(f"  round {r + 1}/{args.rounds}", end="\r", file=sys.stderr, flush=True)
    floors = [sum(PER_REQUEST[s] * added[s][r] for s in PER_REQUEST) for r in range(args.rounds)]
    for s in PER_REQUEST:
        v = added[s]
        print(
            f"{s:<7} x{PER_REQUEST[s]}: {statistics.median(v):.4f} ms "
            f"[{min(v):.4f}, {max(v):.4f}] each"
        )
    floor = statistics.median(floors)
    print(
        f"floor, the chain's eleven spans: {floor:.3f} ms a request [{min(floors):.3f}, "
        f"{max(floors):.3f}] = {floor / HOPS:.3f} ms a hop"
    )
    replay = statistics.median(added["replay"])
    print(
        f"the {count} spans of a real chain request (names, kinds, attributes, marks, "
        f"parents), bare SDK, exported: {replay:.3f} ms a request "
        f"[{min(added['replay']):.3f}, {max(added['replay']):.3f}] = {replay / HOPS:.3f} ms a hop"
    )
    bare = statistics.median(added["span"])
    print(
        f"eleven bare SDK spans (no attributes, no instrumentation), exported: {bare:.3f} ms "
        f"a request [{min(added['span']):.3f}, {max(added['span']):.3f}] "
        f"= {bare / HOPS:.3f} ms a hop"
    )
    print(
        f"concurrency 1 goal: 0.1 ms a hop; the floor alone is {floor / HOPS / 0.1:.2f}x it, "
        f"the same spans on the bare SDK {replay / HOPS / 0.1:.2f}x",
        flush=True,
    )
    chain = _chain_cpu_ms(args.chain_requests, 8)
    budget = 0.02 * chain
    print(
        f"untraced chain at concurrency 8: {chain:.2f} ms of CPU a request (services and "
        f"client); 2% of it: {budget:.3f} ms; the floor alone is {floor / budget:.2f}x it, "
        f"the same spans on the bare SDK {replay / budget:.2f}x, eleven bare spans "
        f"{bare / budget:.2f}x"
    )
    tmp.cleanup()


if __name__ == "__main__":
    main()
