"""What-if under load, proven against real runs.

For each configuration (profile, gateway pool, concurrency, stage, factor): ``hoptrace
serve`` with the profile as it is, benched with ``hoptrace bench``; then ``hoptrace
serve`` with that stage really K times faster (``--profile 'lan,inference=10'``),
benched the same way; then ``hoptrace whatif`` of the first run with ``--model load``
(and ``--model retime``) against the second run's measured P50 and P90. The bench
client and the collector share the cores with the chain and count as load.

    python benchmarks/whatif_load.py                 # the whole protocol (about 25 min)
    python benchmarks/whatif_load.py --only 0,3      # some configurations
    python benchmarks/whatif_load.py --requests 48   # shorter runs
    python benchmarks/whatif_load.py --keep /tmp/wl  # keep the runs; projected again from
                                                     # them next time (no new runs)

Prints one row per configuration and the median and worst error of each model.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KEY = "hoptrace-demo-key"
#: (profile, gateway pool (0: unlimited), concurrency, stage, K)
CONFIGS = [
    ("lan", 0, 4, "inference", 10),
    ("lan", 0, 32, "inference", 10),
    ("lan", 0, 16, "inference", 2),
    ("lan", 0, 8, "inference", 100),
    ("lan", 4, 16, "inference", 10),
    ("lan", 8, 32, "inference.decode", 10),
    ("lan", 0, 16, "inference.prefill", 10),
    ("lan", 0, 1, "inference", 10),
    ("wan", 8, 2, "inference", 100),
    ("wan", 8, 16, "inference", 100),
    ("wan", 4, 8, "inference", 10),
    ("wan", 0, 8, "auth", 0.5),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _hoptrace(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tracer.cli", *args], capture_output=True, text=True, **kw
    )


def _serve(store: Path, profile: str, pool: int) -> tuple[subprocess.Popen, int, int]:
    port, otlp = _free_port(), _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracer.cli", "serve", "--port", str(port), "--otlp-port",
         str(otlp), "--store", str(store), "--profile", profile, "--max-concurrency",
         str(pool)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            time.sleep(0.2)
    time.sleep(1.0)  # the chain behind the gateway
    return proc, port, otlp


def _stop(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


def _bench(store: Path, profile: str, pool: int, c: int, requests: int, warmup: int) -> dict:
    kept = store.with_suffix(".bench.json")
    if kept.exists():
        return json.loads(kept.read_text())
    proc, port, otlp = _serve(store, profile, pool)
    try:
        env = dict(os.environ, OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{otlp}")
        out = _hoptrace(
            "bench", f"http://127.0.0.1:{port}/v1", "--api-key", KEY, "--requests",
            str(requests), "--warmup", str(warmup), "--concurrency", str(c),
            "--max-tokens", "32", "--format", "json", "--traces", str(store), env=env,
        )  # fmt: skip
    finally:
        _stop(proc)
    if out.returncode:
        raise SystemExit(f"bench failed: {out.stderr.strip()[-400:]}")
    level = json.loads(out.stdout)["levels"][0]
    kept.write_text(json.dumps(level))
    return level


def _whatif(store: Path, run: str, stage: str, k: float, model: str) -> dict:
    out = _hoptrace(
        "whatif", str(store), "--run", run, "--stage", stage, "--speedup", str(k),
        "--model", model, "--format", "json",
    )  # fmt: skip
    if out.returncode:
        raise SystemExit(f"whatif failed: {out.stderr.strip()[-400:]}")
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="configuration numbers, comma-separated")
    parser.add_argument("--requests", type=int, default=96)
    parser.add_argument("--warmup", type=int, default=32)
    parser.add_argument("--keep", help="a folder to keep the runs in (and reuse them from)")
    args = parser.parse_args()
    picked = [int(x) for x in args.only.split(",")] if args.only else range(len(CONFIGS))
    errors: dict[str, list[float]] = {"load": [], "retime": []}
    print(
        "# | profile | pool | c | change | model | P50 projected / measured | "
        "P90 projected / measured"
    )
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or scratch
        Path(tmp).mkdir(parents=True, exist_ok=True)
        for n in picked:
            profile, pool, c, stage, k = CONFIGS[n]
            store = Path(tmp) / f"run{n}.db"
            base = _bench(store, profile, pool, c, args.requests, args.warmup)
            cand = _bench(Path(tmp) / f"cand{n}.db", f"{profile},{stage}={k:g}", pool, c,
                          args.requests, args.warmup)  # fmt: skip
            measured = cand["e2e_ms"]
            for model in ("load", "retime"):
                got = _whatif(store, base["run"], stage, k, model)
                after = got["after_ms"]
                e50 = after["p50"] / measured["p50"] - 1
                e90 = after["p90"] / measured["p90"] - 1
                errors[model] += [abs(e50), abs(e90)]
                print(
                    f"{n} | {profile} | {pool or 'unlimited'} | {c} | {stage} x{k:g} | "
                    f"{model} | {after['p50']:,.0f} / {measured['p50']:,.0f} ms ({e50:+.0%}) | "
                    f"{after['p90']:,.0f} / {measured['p90']:,.0f} ms ({e90:+.0%})",
                    flush=True,
                )
    for model, errs in errors.items():
        if errs:
            print(
                f"{model}: median error {statistics.median(errs):.1%}, worst {max(errs):.1%} "
                f"over {len(errs) // 2} configurations (P50 and P90)"
            )


if __name__ == "__main__":
    main()
