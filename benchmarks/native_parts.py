"""What each compiled part buys ``hoptrace analyze`` end to end, one at a time.

On the LLM mix in the Collector layout (``analyze_scale.py``'s file; ``--traces``,
``--keep``), times ``hoptrace analyze FILE --format json`` as a child process, one
worker and two, with every compiled part on, with each part off alone
(``HOPTRACE_NATIVE`` naming the others), and with every part off, in interleaved
repetitions. It prints the median wall and CPU seconds (user + system, the process and
its workers) with their spread, and each part's gain: the median over repetitions of
(time with the part off) / (time with all on), paired within a repetition so that a
slow moment of the machine weighs on both, in wall and in CPU seconds. A part whose CPU
gain is less than ``--keep-at`` (1.25x) on one worker and on two is named for removal
(CPU seconds move least on a shared machine). All results must be equal.

    python benchmarks/native_parts.py [--traces 90000] [--keep FILE] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from analyze_scale import byte_compile, generate  # noqa: E402

from tracer._compiled import PARTS  # noqa: E402


def _run(path: Path, workers: str, native: str) -> tuple[float, float, dict]:
    env = {**os.environ, "HOPTRACE_WORKERS": workers, "HOPTRACE_NATIVE": native}
    before, start = os.times(), time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "tracer.cli", "analyze", str(path), "--format", "json"],
        capture_output=True,
        env=env,
        check=False,
    )
    wall, after = time.perf_counter() - start, os.times()
    if done.returncode:
        sys.exit(f"hoptrace analyze failed: {done.stderr.decode()}")
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return wall, cpu, json.loads(done.stdout)


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):6.2f} s ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=90_000)
    parser.add_argument("--keep", type=Path, help="write the generated file here and keep it")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved repetitions")
    parser.add_argument("--keep-at", type=float, default=1.25, help="the least gain kept")
    args = parser.parse_args()
    byte_compile()
    configs = {"all on": "on"}
    for part in PARTS:
        configs[f"{part} off"] = ",".join(p for p in PARTS if p != part) or "off"
    configs["all off"] = "off"
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "traces.jsonl"
        if not path.exists():
            print(f"generating {args.traces:,} traces (collector, llm) ...", file=sys.stderr)
            generate(path, args.traces, layout="collector", mix="llm")
        wall: dict[tuple[str, str], list[float]] = {}
        cpu: dict[tuple[str, str], list[float]] = {}
        outputs: dict[tuple[str, str], dict] = {}
        for r in range(args.repeat):
            for workers in ("1", "2"):
                for name, value in configs.items():
                    w, c, out = _run(path, workers, value)
                    wall.setdefault((workers, name), []).append(w)
                    cpu.setdefault((workers, name), []).append(c)
                    outputs[workers, name] = out
            print(f"repetition {r + 1}/{args.repeat} done", file=sys.stderr)
        spans = outputs["1", "all on"]["spans"]
    print(f"file: {spans:,} spans, Collector layout, LLM mix; {args.repeat} interleaved runs")
    print(
        f"{'':14}{'workers':>8}  {'wall, median (min-max)':26}{'CPU, median (min-max)':26}gain (part off / all on)"
    )
    gains: dict[str, list[tuple[float, float]]] = {p: [] for p in PARTS}
    for workers in ("1", "2"):
        for name in configs:
            pairs = []
            for seconds in (wall, cpu):
                base = seconds[workers, "all on"]
                ratios = [a / b for a, b in zip(seconds[workers, name], base, strict=True)]
                pairs.append(statistics.median(ratios))
            part = name.removesuffix(" off")
            if part in gains:
                gains[part].append((pairs[0], pairs[1]))
            print(
                f"{name:14}{workers:>8}  {_spread(wall[workers, name]):26}"
                f"{_spread(cpu[workers, name]):26}{pairs[0]:.2f}x wall, {pairs[1]:.2f}x CPU"
            )
    same = len({json.dumps(o, sort_keys=True) for o in outputs.values()}) == 1
    print(f"results: {'all equal' if same else 'DIFFER'}")
    # The verdict reads CPU seconds: on a shared machine they move least (the wall time
    # of a run also holds the other work's), and a part's work is CPU work.
    for part, got in gains.items():
        verdict = "keep" if max(c for _, c in got) >= args.keep_at else "remove"
        print(
            f"{part}: buys {got[0][1]:.2f}x CPU ({got[0][0]:.2f}x wall) on one worker, "
            f"{got[1][1]:.2f}x CPU ({got[1][0]:.2f}x wall) on two: {verdict}"
        )
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
