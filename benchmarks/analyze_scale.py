"""``hoptrace analyze`` on about 1,000,000 spans against a plain ``json.loads``.

Generates about 90,000 traces of the seven-stage chain (11 spans each, varied
timings) as OTLP JSON lines, then, in one run, times (a) ``json.loads`` of every line
in this process and (b) ``hoptrace analyze FILE --format json`` end to end as a child
process, and reports the peak memory of its whole process tree (the analyzer forks
one worker per CPU for a large file; the sum of their resident sizes, sampled every
20 ms from /proc). Targets: (b) at most 3x (a), peak memory under 2 GiB. For
comparison it also times the serial path (HOPTRACE_WORKERS=1).

    python benchmarks/analyze_scale.py [--traces 90000] [--keep FILE] [--repeat 3] [--no-serial]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
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


def _tree_rss_kib(root: int) -> int:
    """Resident KiB of ``root`` and all its descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
        except OSError:
            continue
        pid = int(entry)
        children.setdefault(int(fields["PPid"]), []).append(pid)
        rss[pid] = int(fields.get("VmRSS", "0 kB").split()[0])
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


def run_analyze(path: Path, workers: str | None) -> tuple[float, float, dict]:
    """Wall seconds, peak MiB of the process tree, and the JSON result."""
    env = dict(os.environ)
    if workers is not None:
        env["HOPTRACE_WORKERS"] = workers
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracer.cli", "analyze", str(path), "--format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss_kib(proc.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    elapsed = time.perf_counter() - start
    done.set()
    sampler.join()
    if proc.returncode != 0:
        sys.exit(f"hoptrace analyze failed: {err.decode()}")
    return elapsed, peak / 1024, json.loads(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=90_000)
    parser.add_argument("--keep", type=Path, help="write the generated file here and keep it")
    parser.add_argument("--no-serial", action="store_true", help="skip the serial comparison")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved repetitions")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "traces.jsonl"
        if not path.exists():
            print(f"generating {args.traces:,} traces ...", file=sys.stderr)
            spans = generate(path, args.traces)
        else:
            spans = args.traces * 11
        size_mb = path.stat().st_size / 1e6

        # Interleaved repetitions; the fastest of each is the least disturbed by the
        # other tenants of a shared machine.
        parses, analyses, peaks = [], [], []
        for _ in range(args.repeat):
            start = time.perf_counter()
            with open(path, "rb") as fh:
                for line in fh:
                    json.loads(line)
            parses.append(time.perf_counter() - start)
            seconds, peak, out = run_analyze(path, None)
            analyses.append(seconds)
            peaks.append(peak)
        serial = None if args.no_serial else run_analyze(path, "1")
    parse_s, analyze_s, peak_mib = min(parses), min(analyses), max(peaks)
    ratio = analyze_s / parse_s
    print(f"file:                    {size_mb:,.0f} MB, {spans:,} spans, {out['traces']:,} traces")
    print(
        f"json.loads every line:   {parse_s:.2f} s (fastest of {args.repeat}: "
        + ", ".join(f"{x:.2f}" for x in parses)
        + ")"
    )
    print(
        f"hoptrace analyze (json): {analyze_s:.2f} s on {os.cpu_count()} CPUs (fastest of "
        + ", ".join(f"{x:.2f}" for x in analyses)
        + f"), peak memory {peak_mib:,.0f} MiB (all processes)"
    )
    print(
        f"ratio analyze/parse:     {ratio:.2f}x (target <= 3x: {'PASS' if ratio <= 3 else 'FAIL'}; "
        f"memory < 2048 MiB: {'PASS' if peak_mib < 2048 else 'FAIL'})"
    )
    if serial is not None:
        s_s, s_peak, s_out = serial
        same = "same result" if s_out == out else "RESULTS DIFFER"
        print(
            f"serial (HOPTRACE_WORKERS=1): {s_s:.2f} s, {s_s / parse_s:.2f}x, peak "
            f"{s_peak:,.0f} MiB; {same}"
        )
    print(f"e2e P50/P90 ms:          {out['e2e_ms']['p50']:.1f} / {out['e2e_ms']['p90']:.1f}")


if __name__ == "__main__":
    main()
