"""CPU time per request of each demo service, traced against untraced, and where it goes.

Two copies of the chain run side by side (one with ``OTEL_SDK_DISABLED=true``), spans
of the traced one go to a receiver that only acknowledges, and an untraced client sends
both the same streamed requests (8 tokens) in interleaved runs. Printed per service:
the CPU (user + system from ``/proc``, export thread included) per request, traced and
untraced, the median of the per-run differences and their spread. CPU per request is
the figure a shared machine leaves nearly alone: other processes delay requests, they
do not make a request's own work bigger.

``--py-spy DIR`` then records each traced service with py-spy (raw collapsed stacks,
``DIR/<service>.txt``) during one more run, for ``benchmarks/profile_share.py``.

    python benchmarks/service_cpu.py [--requests 300] [--runs 5] [--profile bare]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
from pathlib import Path

from demo_app.chain import Chain
from demo_app.overhead import ack_receiver, stream_requests

_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _run(chain: Chain, requests: int, concurrency: int) -> dict[str, float]:
    """CPU ms per request of each service over one run."""
    pids = chain.service_pids
    before = {name: _cpu_s(pid) for name, pid in pids.items()}
    # The same streamed requests as the latency benchmark (demo_app.overhead).
    asyncio.run(
        stream_requests(chain.base_url + "/chat/completions", chain.api_key, requests, concurrency)
    )
    return {name: (_cpu_s(pid) - before[name]) / requests * 1000 for name, pid in pids.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--runs", type=int, default=5, help="interleaved runs of each chain")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--profile", default="bare")
    parser.add_argument("--py-spy", dest="py_spy", default=None, help="record profiles here")
    parser.add_argument("--spy-requests", type=int, default=1500)
    args = parser.parse_args()
    # The SDK's default batching (512 spans or 5 s), as chain_overhead.py: how long
    # spans wait in the queue decides how much of them the garbage collector sees. A
    # batch left at the end of one run is exported, and counted, in the next run.
    env = {"OTEL_BSP_SCHEDULE_DELAY": "5000", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "512"}
    with (
        tempfile.TemporaryDirectory(prefix="hoptrace-cpu-") as tmp,
        ack_receiver() as endpoint,
    ):
        traced = Chain(Path(tmp) / "t.db", profile=args.profile, otlp_endpoint=endpoint, env=env)
        untraced = Chain(Path(tmp) / "u.db", profile=args.profile, traced=False)
        with traced, untraced:
            chains = {"traced": traced, "untraced": untraced}
            for chain in chains.values():
                _run(chain, args.warmup, args.concurrency)
            got: dict[str, list[dict[str, float]]] = {"traced": [], "untraced": []}
            for n in range(args.runs):
                order = ["traced", "untraced"] if n % 2 == 0 else ["untraced", "traced"]
                for name in order:
                    got[name].append(_run(chains[name], args.requests, args.concurrency))
            print(
                f"CPU ms per request, {args.runs} interleaved runs of {args.requests} requests, "
                f"profile {args.profile}, concurrency {args.concurrency}"
            )
            print(f"{'service':<9}{'traced':>9}{'untraced':>10}{'added, median [min, max]':>32}")
            totals = {"traced": [0.0] * args.runs, "untraced": [0.0] * args.runs}
            for service in ("gateway", "app", "model"):
                t = [r[service] for r in got["traced"]]
                u = [r[service] for r in got["untraced"]]
                for i in range(args.runs):
                    totals["traced"][i] += t[i]
                    totals["untraced"][i] += u[i]
                d = [a - b for a, b in zip(t, u, strict=True)]
                print(
                    f"{service:<9}{statistics.median(t):>9.3f}{statistics.median(u):>10.3f}"
                    f"{statistics.median(d):>12.3f} [{min(d):6.3f}, {max(d):6.3f}]"
                )
            d = [a - b for a, b in zip(totals["traced"], totals["untraced"], strict=True)]
            print(
                f"{'all':<9}{statistics.median(totals['traced']):>9.3f}"
                f"{statistics.median(totals['untraced']):>10.3f}"
                f"{statistics.median(d):>12.3f} [{min(d):6.3f}, {max(d):6.3f}]",
                flush=True,
            )
            if args.py_spy:
                for name, chain in chains.items():
                    _record(chain, Path(args.py_spy) / name, args.spy_requests, args.concurrency)


def _record(chain: Chain, out: Path, requests: int, concurrency: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    spy = shutil.which("py-spy") or "py-spy"
    procs = [
        subprocess.Popen(
            [
                spy,
                "record",
                "--format",
                "raw",
                "--rate",
                "500",
                "--nonblocking",
                "--full-filenames",
                "--gil",
                "--pid",
                str(pid),
                "-o",
                str(out / f"{name}.txt"),
            ],  # fmt: skip
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for name, pid in chain.service_pids.items()
    ]
    try:
        _run(chain, requests, concurrency)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGINT)
        for proc in procs:
            proc.wait(timeout=30)
    print(f"profiles in {out}")


if __name__ == "__main__":
    main()
