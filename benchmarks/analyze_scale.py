"""``hoptrace analyze`` on about 1,000,000 spans against a plain ``json.loads``.

Generates about 90,000 traces of the seven-stage chain (11 spans each, varied
timings) as OTLP JSON lines (or reuses ``--keep FILE``), then, in interleaved
repetitions, times (a) ``json.loads`` of every line in this process, (b)
``orjson.loads`` of every line, (c) ``hoptrace analyze FILE --format json`` end to
end as a child process with ``HOPTRACE_WORKERS=1`` (one core) and (d) the same with
the default worker count (every core); and, as the floor under (c), the analyzer's own
decoder turning every line into spans by trace and nothing more. It reports medians and spreads (min-max), the
ratios (c)/(a) and (d)/(a) of the medians, and the peak memory of each analysis's
whole process tree, sampled every 20 ms from /proc: the sum of the resident sizes of
the process and its forked workers (which counts the pages a worker shares with its
parent twice), and the sum of their proportional sizes (which counts them once). The targets: serial at most 2x (a) and every core
at most 1.2x (a) on the whole-trace layout; the script prints PASS or FAIL against them.
``--dask`` adds (e) ``--engine dask`` on a LocalCluster of the default worker count,
started and closed by the command, timed end to end with its worker processes.

``--layout`` says how the spans are laid out in lines: ``whole`` (whole traces, eight
to a line) or ``collector`` (as a Collector's file exporter writes what each
service's exporter sends: one line per export of one service, 256 spans of many traces,
so a trace's parts sit on several lines). ``--mix llm`` makes a third of the traces
call a serving engine (a vLLM-like request span with queue, prefill and decode
latencies), gives one trace in twenty an error status on a random span and one in ten
an extra event, and puts a unique response id on every model span; ``--mix chain``
is the plain seven-stage chain. Targets on ``--layout collector --mix llm``: one core at
most 1.5x json.loads, every core at most 1.0x, peak memory at most 256 MiB.

    python benchmarks/analyze_scale.py [--traces 90000] [--layout whole|collector]
        [--mix chain|llm] [--both] [--keep FILE] [--repeat 3] [--dask]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

from tracer.spans._otlp_lines import traces_from_otlp_line

# The checkout's tests/synthetic.py (test data, not shipped in the package).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.synthetic import SEED_MS, chain_trace, to_otlp_json  # noqa: E402


def generate(
    path: Path, traces: int, per_line: int = 8, layout: str = "whole", mix: str = "chain"
) -> int:
    rng = random.Random(7)
    spans = 0
    t0 = 1_750_000_000_000_000_000
    # collector layout: per service, the spans not yet exported
    exports: dict[str, list[dict]] = {}
    with open(path, "wb") as fh:
        batch = []
        for i in range(traces):
            ms = {k: v * rng.uniform(0.6, 1.6) for k, v in SEED_MS.items()}
            engine = mix == "llm" and i % 3 == 0
            trace = chain_trace(
                f"{i + 1:032x}",
                t0 + i * 7_000_000,
                ms,
                model_ttft_ms=ms["inference"] * 0.2,
                tokens=(600, 120),
                engine_ms=(
                    (ms["inference"] * 0.05, ms["inference"] * 0.15, ms["inference"] * 0.7)
                    if engine
                    else None
                ),
            )
            if mix == "llm":
                if rng.random() < 0.05:
                    trace[rng.randrange(len(trace))].status = 2
                for s in trace:
                    if s.attributes.get("gen_ai.request.model"):
                        s.attributes["gen_ai.response.id"] = f"chatcmpl-{i:x}"
            spans += len(trace)
            if layout == "collector":
                doc = to_otlp_json(trace)
                for resource in doc["resourceSpans"]:
                    service = resource["resource"]["attributes"][0]["value"]["stringValue"]
                    items = resource["scopeSpans"][0]["spans"]
                    if mix == "llm" and rng.random() < 0.1:
                        items[0].setdefault("events", []).append(
                            {"name": "log", "timeUnixNano": items[0]["startTimeUnixNano"]}
                        )
                    pending = exports.setdefault(service, [])
                    pending.extend(items)
                    if len(pending) >= 256:
                        fh.write(_export_line(service, pending[:256]))
                        del pending[:256]
                continue
            batch.extend(trace)
            if (i + 1) % per_line == 0:
                fh.write(orjson.dumps(to_otlp_json(batch)) + b"\n")
                batch = []
        if batch:
            fh.write(orjson.dumps(to_otlp_json(batch)) + b"\n")
        for service, pending in exports.items():
            if pending:
                fh.write(_export_line(service, pending))
    return spans


def _export_line(service: str, spans: list[dict]) -> bytes:
    """One export of one service, as a Collector's file exporter writes it."""
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}
    doc = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}
    return orjson.dumps(doc) + b"\n"


def _tree_memory_kib(root: int) -> tuple[int, int]:
    """Resident and proportional KiB of ``root`` and all its descendants (Linux /proc).

    The resident size (VmRSS) counts a page that a forked worker still shares with its
    parent (the interpreter, the libraries) in both processes; the proportional size
    (Pss, /proc/PID/smaps_rollup) divides such a page among the processes that map it,
    so its sum is the memory the process tree holds."""
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
    total_rss = total_pss = 0
    stack = [root]
    while stack:
        pid = stack.pop()
        total_rss += rss.get(pid, 0)
        try:
            with open(f"/proc/{pid}/smaps_rollup") as fh:
                rollup = dict(line.split(":", 1) for line in fh if ":" in line)
            total_pss += int(rollup.get("Pss", "0 kB").split()[0])
        except (OSError, ValueError):
            total_pss += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total_rss, total_pss


def run_analyze(
    path: Path, workers: str | None, *extra: str, native: bool = True
) -> tuple[float, tuple[float, float], dict, float]:
    """Wall seconds, the peak MiB of the process tree (resident, proportional: see
    :func:`_tree_memory_kib`), the JSON result, and the CPU seconds (user + system) of the
    process and its workers; ``native=False``: with ``HOPTRACE_NATIVE=off``."""
    env = dict(os.environ)
    if workers is not None:
        env["HOPTRACE_WORKERS"] = workers
    if not native:
        env["HOPTRACE_NATIVE"] = "off"
    before = os.times()
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracer.cli", "analyze", str(path), "--format", "json", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    peak = [0, 0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            rss, pss = _tree_memory_kib(proc.pid)
            peak[0], peak[1] = max(peak[0], rss), max(peak[1], pss)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    elapsed = time.perf_counter() - start
    after = os.times()
    done.set()
    sampler.join()
    if proc.returncode != 0:
        sys.exit(f"hoptrace analyze failed: {err.decode()}")
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return elapsed, (peak[0] / 1024, peak[1] / 1024), json.loads(out), cpu


def byte_compile() -> None:
    """Byte-compile hoptrace's modules, as ``pip install`` does: a checkout run with
    ``PYTHONDONTWRITEBYTECODE`` set would compile every module on every run (0.1-0.2 s
    on the 2-core machine), which no installed hoptrace does. Where the folders cannot
    be written, the runs compile as they would anyway."""
    import collector
    import tracer

    folders = [str(Path(m.__file__).parent) for m in (tracer, collector)]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", *folders],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )


def _spread(values: list[float]) -> str:
    return (
        f"median {statistics.median(values):.2f} s (min {min(values):.2f}, max {max(values):.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=90_000)
    parser.add_argument("--keep", type=Path, help="write the generated file here and keep it")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved repetitions")
    parser.add_argument("--dask", action="store_true", help="also time --engine dask")
    parser.add_argument(
        "--python-too",
        action="store_true",
        help="also time one worker with HOPTRACE_NATIVE=off (the Python decoder and "
        "per-trace steps instead of the compiled ones)",
    )
    parser.add_argument("--layout", choices=("whole", "collector"), default="whole")
    parser.add_argument("--mix", choices=("chain", "llm"), default="chain")
    parser.add_argument(
        "--both",
        action="store_true",
        help="time the whole-trace chain and the Collector layout with the LLM mix side by "
        "side, interleaved (--keep then names a folder for the two files)",
    )
    args = parser.parse_args()
    byte_compile()
    runs: list[tuple[str, str | None, tuple[str, ...]]] = [("serial", "1", ()), ("all", None, ())]
    if args.dask:
        runs.append(("dask", None, ("--engine", "dask")))
    if args.python_too:
        runs.append(("python", "1", ()))
    cases = [("whole", "chain"), ("collector", "llm")] if args.both else [(args.layout, args.mix)]
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for layout, mix in cases:
            if args.both:
                folder = args.keep or Path(tmp)
                folder.mkdir(parents=True, exist_ok=True)
                path = folder / f"{layout}-{mix}-{args.traces}.jsonl"
            else:
                path = args.keep or Path(tmp) / "traces.jsonl"
            if not path.exists():
                print(f"generating {args.traces:,} traces ({layout}, {mix}) ...", file=sys.stderr)
                generate(path, args.traces, layout=layout, mix=mix)
            paths[layout, mix] = path
        results = {case: _Case() for case in cases}
        for _ in range(args.repeat):
            for case in cases:
                results[case].measure(paths[case], runs)
    for (layout, mix), result in results.items():
        result.report(paths[layout, mix], layout, mix, args)


class _Case:
    """The timings of one file over the interleaved repetitions."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {
            k: [] for k in ("json", "orjson", "decode", "serial", "all", "dask", "python")
        }
        self.cpu: dict[str, list[float]] = {
            k: [] for k in ("json", "serial", "all", "dask", "python")
        }
        #: (resident, proportional) peaks, MiB
        self.peaks: dict[str, list[tuple[float, float]]] = {
            k: [] for k in ("serial", "all", "dask", "python")
        }
        self.outputs: dict[str, dict] = {}
        self.size_mb = 0.0

    def measure(self, path: Path, runs: list[tuple[str, str | None, tuple[str, ...]]]) -> None:
        self.size_mb = path.stat().st_size / 1e6
        # Read the file once first: otherwise the first timing (json.loads) alone reads
        # from disk, which made a 1.9 GB file's ratios look 25% better than they are.
        with open(path, "rb") as fh:
            while fh.read(1 << 24):
                pass
        for name, loads in (
            ("json", json.loads),
            ("orjson", orjson.loads),
            ("decode", traces_from_otlp_line),
        ):
            start, cpu_start = time.perf_counter(), time.process_time()
            with open(path, "rb") as fh:
                for line in fh:
                    loads(line)
            self.times[name].append(time.perf_counter() - start)
            if name == "json":
                self.cpu[name].append(time.process_time() - cpu_start)
        for name, workers, extra in runs:
            seconds, peak, out, used = run_analyze(path, workers, *extra, native=name != "python")
            self.times[name].append(seconds)
            self.cpu[name].append(used)
            self.peaks[name].append(peak)
            self.outputs[name] = out

    def report(self, path: Path, layout: str, mix: str, args: argparse.Namespace) -> None:
        times, cpu, peaks, outputs = self.times, self.cpu, self.peaks, self.outputs
        median = {k: statistics.median(v) for k, v in times.items() if v}
        out = outputs["all"]
        print(
            f"file:              {self.size_mb:,.0f} MB, {out['spans']:,} spans, "
            f"{out['traces']:,} traces"
        )
        print(f"layout, mix:       {layout}, {mix}")
        print(f"repetitions:       {args.repeat}, interleaved; {os.cpu_count()} CPUs")
        print(f"json.loads:        {_spread(times['json'])}")
        print(f"orjson.loads:      {_spread(times['orjson'])}")
        # The analyzer's own decoder, each line into spans by trace and nothing else: the
        # floor under the analysis, whatever it does with the spans afterwards.
        print(
            f"decoding alone:    {_spread(times['decode'])}; "
            f"{median['decode'] / median['json']:.2f}x json.loads"
        )
        targets = (1.5, 1.0) if layout == "collector" else (2.0, 1.2)
        for name, label, target in (
            ("serial", "analyze, 1 worker", targets[0]),
            ("all", "analyze, default", targets[1]),
        ):
            ratio = median[name] / median["json"]
            ratios = ", ".join(
                f"{a / j:.2f}" for a, j in zip(times[name], times["json"], strict=True)
            )
            rss = max(r for r, _ in peaks[name])
            pss = max(p for _, p in peaks[name])
            print(
                f"{label + ':':19}{_spread(times[name])}; peak {rss:,.0f} MiB resident, "
                f"{pss:,.0f} MiB proportional (all processes; target <= 256 MiB: "
                f"{'PASS' if rss <= 256 else 'FAIL'} / {'PASS' if pss <= 256 else 'FAIL'})"
            )
            print(
                f"{'':19}ratio to json.loads {ratio:.2f}x (per repetition {ratios}; target <= "
                f"{target}x: {'PASS' if ratio <= target else 'FAIL'})"
            )
        # CPU seconds are what other work on a shared machine disturbs least: the serial
        # run's CPU against json.loads' CPU is the per-core cost; the default run's CPU
        # summed over its workers shows what splitting the file costs.
        print(
            f"{'CPU (user+sys):':19}json.loads {statistics.median(cpu['json']):.2f} s, analyze "
            f"1 worker {statistics.median(cpu['serial']):.2f} s "
            f"({statistics.median(cpu['serial']) / statistics.median(cpu['json']):.2f}x), "
            f"default {statistics.median(cpu['all']):.2f} s summed over its processes"
        )
        same = "same result" if outputs["serial"] == outputs["all"] else "RESULTS DIFFER"
        print(f"serial vs default: {same}")
        if args.dask:
            print(
                f"{'analyze, dask:':19}{_spread(times['dask'])}; peak "
                f"{max(r for r, _ in peaks['dask']):,.0f} MiB resident (all processes); "
                f"{median['dask'] / median['json']:.2f}x json.loads; CPU "
                f"{statistics.median(cpu['dask']):.2f} s summed over its processes"
            )
            same = "same result" if outputs["serial"] == outputs["dask"] else "RESULTS DIFFER"
            print(f"serial vs dask:    {same}")
        if times["python"]:
            ratios = ", ".join(
                f"{a / j:.2f}" for a, j in zip(times["python"], times["json"], strict=True)
            )
            print(
                f"{'compiled off:':19}{_spread(times['python'])}; one worker, "
                f"HOPTRACE_NATIVE=off; {median['python'] / median['json']:.2f}x json.loads "
                f"(per repetition {ratios}); peak "
                f"{max(r for r, _ in peaks['python']):,.0f} MiB resident"
            )
            same = "same result" if outputs["serial"] == outputs["python"] else "RESULTS DIFFER"
            print(f"compiled vs off:   {same}")
        print(f"e2e P50/P90 ms:    {out['e2e_ms']['p50']:.1f} / {out['e2e_ms']['p90']:.1f}")
        print()


if __name__ == "__main__":
    main()
