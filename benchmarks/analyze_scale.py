"""``hoptrace analyze`` on about 1,000,000 spans against a plain ``json.loads``.

Generates about 90,000 traces of the seven-stage chain (11 spans each, varied
timings) as OTLP JSON lines, then, in one run, times (a) ``json.loads`` of every line
in this process and (b) ``hoptrace analyze FILE --format json`` end to end as a child
process, and reports the child's peak memory. Targets: (b) at most 3x (a), peak
memory under 2 GiB.

    python benchmarks/analyze_scale.py [--traces 90000] [--keep FILE]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from tracer.analysis.synthetic import SEED_MS, chain_trace, to_otlp_json


def generate(path: Path, traces: int, per_line: int = 8) -> int:
    rng = random.Random(7)
    spans = 0
    t0 = 1_750_000_000_000_000_000
    with open(path, "wb") as fh:
        batch = []
        for i in range(traces):
            ms = {k: v * rng.uniform(0.6, 1.6) for k, v in SEED_MS.items()}
            trace = chain_trace(
                f"{i + 1:032x}",
                t0 + i * 7_000_000,
                ms,
                model_ttft_ms=ms["inference"] * 0.2,
                tokens=(600, 120),
            )
            spans += len(trace)
            batch.extend(trace)
            if (i + 1) % per_line == 0:
                fh.write(orjson.dumps(to_otlp_json(batch)) + b"\n")
                batch = []
        if batch:
            fh.write(orjson.dumps(to_otlp_json(batch)) + b"\n")
    return spans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=90_000)
    parser.add_argument("--keep", type=Path, help="write the generated file here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "traces.jsonl"
        if not path.exists():
            print(f"generating {args.traces:,} traces ...", file=sys.stderr)
            spans = generate(path, args.traces)
        else:
            spans = args.traces * 11
        size_mb = path.stat().st_size / 1e6

        start = time.perf_counter()
        with open(path, "rb") as fh:
            for line in fh:
                json.loads(line)
        parse_s = time.perf_counter() - start

        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "tracer.cli", "analyze", str(path), "--format", "json"],
            capture_output=True,
        )
        analyze_s = time.perf_counter() - start
        peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        if proc.returncode != 0:
            sys.exit(f"hoptrace analyze failed: {proc.stderr.decode()}")
        out = orjson.loads(proc.stdout)
    ratio = analyze_s / parse_s
    print(f"file:                    {size_mb:,.0f} MB, {spans:,} spans, {out['traces']:,} traces")
    print(f"json.loads every line:   {parse_s:.2f} s")
    print(f"hoptrace analyze (json): {analyze_s:.2f} s, peak memory {peak_mib:,.0f} MiB")
    print(
        f"ratio analyze/parse:     {ratio:.2f}x (target <= 3x: {'PASS' if ratio <= 3 else 'FAIL'}; "
        f"memory < 2048 MiB: {'PASS' if peak_mib < 2048 else 'FAIL'})"
    )
    print(f"e2e P50/P90 ms:          {out['e2e_ms']['p50']:.1f} / {out['e2e_ms']['p90']:.1f}")


if __name__ == "__main__":
    main()
