"""What tracing costs each hop of the demo chain: traced against untraced, side by side.

Two copies of the chain (gateway, app, model; loopback profile, nothing injected) run
at once, one with the OpenTelemetry SDK on in every service and one with
``OTEL_SDK_DISABLED=true``. An untraced client sends both the same streamed requests
(8 tokens): at concurrency 1 alternating request by request (ABBA) in rounds, at
higher concurrency in interleaved pairs of runs. Printed per concurrency level and span sink:
the added latency per request and per hop at P50 and P90 (median over the pairs, and
the smallest and largest pair), and at concurrency 8 the throughput lost, and the CPU time per request tracing adds to the three services
(user + system, span export included: the measure that noise leaves alone). The sinks:
the embedded collector on this machine, and a receiver that only acknowledges (the
collector's CPU then does not count against the tracer).

Goals: at most 0.1 ms per hop at P50 at concurrency 1, at most 2% throughput lost at
concurrency 8; with ``--sample-ratio 0.1`` (the traced chain's services keep a tenth of
the requests with the consistent probability sampler; the rest make non-recording
spans), at most 0.02 ms a hop at P50 and 1% of throughput at concurrency 8.

    python benchmarks/chain_overhead.py [--requests 300] [--pairs 5] [--warmup 20]
        [--sample-ratio 0.1]
"""

from __future__ import annotations

import argparse
import sys
import time

from demo_app.overhead import HOPS, measure_overhead


def _cpu(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="requests per run")
    parser.add_argument("--pairs", type=int, default=5, help="rounds (pairs) per setting")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--sinks", default="collector,ack")
    parser.add_argument("--concurrency", default="1,8")
    parser.add_argument(
        "--sample-ratio",
        type=float,
        default=None,
        help="the share of requests the traced chain samples (default: all)",
    )
    args = parser.parse_args()
    if args.sample_ratio is not None and not 0 <= args.sample_ratio <= 1:
        parser.error(f"--sample-ratio must be in 0..1, got {args.sample_ratio!r}")
    print(
        f"{args.pairs} rounds of {args.requests} streamed requests (8 tokens) to each chain "
        "per setting (c=1: alternating request by request; c>1: interleaved runs), "
        f"{HOPS} traced hops; ms added by tracing (traced - untraced), median [min, max] "
        "over the rounds"
        + ("" if args.sample_ratio is None else f"; traced chain samples {args.sample_ratio:g}"),
        flush=True,
    )
    header = f"{'sink':<10}{'conc':>5}  {'per request P50':>24}  {'per hop P50':>12}  "
    header += f"{'per request P90':>24}  {'throughput lost':>16}  {'CPU ms/request':>15}"
    print(header)
    for sink in args.sinks.split(","):
        for c in (int(x) for x in args.concurrency.split(",")):
            started = time.monotonic()
            o = measure_overhead(
                requests=args.requests,
                warmup=args.warmup,
                pairs=args.pairs,
                concurrency=c,
                sink=sink,
                sample_ratio=args.sample_ratio,
                progress=lambda n, total: print(f"  pair {n}/{total}", end="\r", file=sys.stderr),
            )
            lo50, hi50 = o.spread_ms("p50")
            lo90, hi90 = o.spread_ms("p90")
            lost = o.throughput_lost()
            print(
                f"{sink:<10}{c:>5}  {o.per_request_ms('p50'):>8.3f} [{lo50:6.3f}, {hi50:6.3f}]"
                f"  {o.per_hop_ms('p50'):>12.3f}  {o.per_request_ms('p90'):>8.3f} "
                f"[{lo90:6.3f}, {hi90:6.3f}]  {lost * 100:>15.1f}%"
                f"  {_cpu(o.cpu_per_request_ms()):>15}"
                f"   ({time.monotonic() - started:.0f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
