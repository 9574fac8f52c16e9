"""More calls of the model, projected against real runs.

For each configuration (profile, gateway pool, load, calls, N, K): ``hoptrace serve``
with the profile as it is (one call a request), benched with ``hoptrace bench``; then
``hoptrace serve`` with the app really calling the model N times and the model K times
faster (``--profile 'lan,inference=10,repeat=2'``: N calls in sequence;
``candidates=3``: N in parallel, one answer kept), benched the same way; then
``hoptrace whatif`` of the single-call run (``--stage inference --speedup K --repeat
inference=N``, or ``--fanout``) with ``--model load`` and ``--model retime`` against the
second run's measured P50 and P90. The runs, the bench and the projection are those of
``benchmarks/whatif_load.py`` (imported, not copied).

    python benchmarks/whatif_calls.py                 # the whole protocol
    python benchmarks/whatif_calls.py --only 0,3      # some configurations
    python benchmarks/whatif_calls.py --requests 8 --warmup 2 --only 0   # a smoke run
    python benchmarks/whatif_calls.py --keep /tmp/wc  # keep the runs (reused next time)

As there, the runs are made ``--repetitions`` times in rounds (three by default: every
configuration's pair once, then again, then a third time), and the median projection
is checked against the median measured. Each configuration has single-call runs of its
own, each made right before its changed run: near saturation this two-core machine's
CPU a request moves by up to 40% between identical runs minutes apart
(docs/whatif.md, "More calls"), which a single-call run shared by the configurations
of a round would carry into all of them. A closed loop with the model 10x or more
faster answers 25-50 requests/s, so its changed run sends :data:`LONGER` times the
requests and lasts about as long as its single-call run (8-15 s, not 2-4 s).

Prints one row per configuration and model, and the median and worst error of each
model at P50 and P90.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from whatif_load import (  # noqa: E402
    _bench,
    host_line,
    print_errors,
    project,
    protocol_args,
    rounds,
    tag,
)

from demo_app.chain import stop_on_signals  # noqa: E402

#: (profile, gateway pool (0: unlimited), load (cN clients or rR requests/s),
#: calls ("repeat": in sequence, "candidates": in parallel), N, K (the model K times faster))
CONFIGS = [
    ("lan", 0, "c8", "repeat", 2, 1),
    ("lan", 0, "c8", "candidates", 2, 1),
    ("lan", 0, "c8", "repeat", 3, 10),
    ("lan", 0, "c8", "candidates", 3, 10),
    ("lan", 0, "c8", "repeat", 2, 100),
    ("lan", 0, "c8", "candidates", 3, 100),
    ("lan", 4, "c16", "repeat", 2, 10),
    ("lan", 4, "c16", "candidates", 3, 10),
    # Open loops, the pool's capacity in mind: a lan request holds a gateway worker
    # about 650 ms with one call, so a pool of 8 answers about 12/s.
    ("lan", 8, "r4", "repeat", 2, 10),
    ("lan", 8, "r4", "candidates", 3, 10),
    ("lan", 0, "r6", "repeat", 3, 100),
    ("lan", 0, "r6", "candidates", 2, 100),
]


#: A closed loop's changed run with the model at least this many times faster sends
#: :data:`LONGER` times ``--requests``.
FAST = 10
LONGER = 4


def _change(calls: str, n: int, k: float) -> tuple[str, ...]:
    """The ``whatif`` options of a configuration: the calls, and the model K times faster."""
    option = "--repeat" if calls == "repeat" else "--fanout"
    speed = ("--stage", "inference", "--speedup", f"{k:g}") if k != 1 else ()
    return (*speed, option, f"inference={n}")


def main() -> None:
    args, picked = protocol_args(__doc__, len(CONFIGS), repetitions=3)
    errors: dict[str, list[float]] = {"load": [], "retime": []}
    print("# | profile | pool | load | change | model | P50 projected / measured | "
          "P90 projected / measured")  # fmt: skip
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(args.keep or scratch)
        tmp.mkdir(parents=True, exist_ok=True)

        def make(i: int, r: int) -> tuple[Path, dict, Path, dict]:
            profile, pool, load, calls, n, k = CONFIGS[i]
            speed = f",inference={k:g}" if k != 1 else ""
            # The configuration's own single-call run, right before its changed run.
            store = tmp / f"one{i}{tag(r)}.db"
            level = _bench(store, profile, pool, load, args.requests, args.warmup)
            more = LONGER if load[0] == "c" and k >= FAST else 1
            cstore = tmp / f"calls{i}{tag(r)}.db"
            cand = _bench(cstore, f"{profile}{speed},{calls}={n}", pool, load,
                          args.requests * more, args.warmup)  # fmt: skip
            return store, level, cstore, cand

        for i, pairs in rounds(picked, args.repetitions, make):
            profile, pool, load, calls, n, k = CONFIGS[i]
            change = f"{'best of' if calls == 'candidates' else 'repeat'} {n}, model x{k:g}"
            print(host_line(i, [(s, lv["run"]) for p in pairs for s, lv in (p[:2], p[2:])]))
            for model in ("load", "retime"):
                got = project(pairs, model, _change(calls, n, k))
                head = f"{i} | {profile} | {pool or 'unlimited'} | {load} | {change} | {model}"
                if isinstance(got, str):
                    print(f"{head} | declined: {got}", flush=True)
                    continue
                after, measured, note = got
                e50 = after["p50"] / measured["p50"] - 1
                e90 = after["p90"] / measured["p90"] - 1
                errors[model] += [abs(e50), abs(e90)]
                print(
                    f"{head} | {after['p50']:,.0f} / {measured['p50']:,.0f} ms ({e50:+.0%}) | "
                    f"{after['p90']:,.0f} / {measured['p90']:,.0f} ms ({e90:+.0%}) | {note}",
                    flush=True,
                )
    print_errors(errors)


if __name__ == "__main__":
    with stop_on_signals():  # SIGTERM stops the chain it started, as Ctrl-C does
        main()
