"""``hoptrace demo``, the README's main job, end to end as a user runs it."""

from __future__ import annotations

import re

import pytest

from tests.helpers import hoptrace

# Boots real service processes on loopback ports: run with -m integration.
pytestmark = pytest.mark.integration


def test_demo_prints_both_runs_the_projection_and_the_answer(tmp_path):
    done = hoptrace(
        "demo", "--requests", "8", "--warmup", "2", "--profile", "lan",
        "--store", str(tmp_path / "demo.db"),
        timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    # The notes wrap at the terminal width: read them with their words rejoined.
    flat = " ".join(out.split())
    for title in ("Baseline: the model as it is", "Candidate: the model 100x faster",
                  "What if inference were 100x faster", "The answer"):  # fmt: skip
        assert title in out
    measured = re.search(r"measured (\d+\.\d+)x \(([\d,]+) -> ([\d,]+) ms\)", flat)
    assert measured, out[-2000:]
    speedup = float(measured.group(1))
    # lan: about 600 ms of model in about 760 ms; a 100x model gives 3x to 6x, not 100x,
    # on a quiet machine. On a busy one (load average 8-12 on two cores) the services'
    # own code slows and it fell to 1.45x: the bounds only say that the candidate run
    # is faster than the baseline and far from 100x, which holds under any load.
    assert 1.1 < speedup < 20.0
    exemplars = re.search(r"exemplar traces: ([0-9a-f]{32}) / ([0-9a-f]{32})", flat)
    assert exemplars
    # The model reports queue, prefill and decode as vLLM does: inference is split, and
    # the answer says which part of a faster model the user would feel.
    assert "↳ inference.decode" in out and "↳ inference.prefill" in out

    phases = dict(
        re.findall(r"only inference\.(prefill|decode) 100x faster: end-to-end (\d+\.\d+)x", flat)
    )
    # lan: prefill 120 ms, decode 31 x 15 ms per request: decode moves the end to end most.
    assert float(phases["decode"]) > float(phases["prefill"]) > 1.0
    first = dict(
        re.findall(r"only inference\.(prefill|decode) [^;]*?first token (\d+\.\d+)x", flat)
    )
    assert float(first["prefill"]) > 1.5 and float(first["decode"]) == pytest.approx(1.0, abs=0.05)
    assert re.search(r"candidate requests by fallback tier: primary 8", flat)
    cost = re.search(r"what tracing itself costs: ([+-]\d+\.\d+) ms per request at P50", flat)
    assert cost and abs(float(cost.group(1))) < 50  # a measured number, not a placeholder
    # Progress went to stderr, the report to stdout.
    assert "candidate (model x100)" in done.stderr and "candidate (model x100)" not in out
    # The answer ends with what the faster model buys in calls, from the baseline run.
    buys = re.search(
        r"what 100x buys: a self-check round \(the model called twice in sequence\) costs "
        r"\+([\d,]+) ms at P50, best-of-3 \(three calls in parallel\) ([+-][\d,]+) ms; within "
        r"the baseline's P90 \(e2e <= ([\d,]+) ms\) for 90%, (\d+)(?: or more)? sequential "
        r"calls fit \(P50 ([\d,]+) ms",
        flat,
    )
    assert buys, flat[-1500:]
    assert 0 < int(buys.group(1)) < 100 and int(buys.group(4)) >= 2
    # Best-of-3 waits for the slowest of three calls a tenth of a second long at 100x:
    # a few milliseconds more, or less by the simulation's own spread (its P50 before
    # and after come from different interleavings of the same requests).
    assert -20 < int(buys.group(2).replace(",", "")) < 100
    assert flat.rstrip().endswith("model)")


def test_demo_html_page(tmp_path):
    page = tmp_path / "demo.html"
    done = hoptrace(
        "demo", "--requests", "4", "--warmup", "1", "--profile", "loopback",
        "--store", str(tmp_path / "demo.db"), "--format", "html", "-o", str(page),
        "--no-overhead",
        timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    html = page.read_text()
    for part in ('id="whatif"', 'id="compare"', 'id="share-bars"', 'id="waterfall-0"'):
        assert part in html


def test_the_readme_budget_example_passes_the_baseline_and_fails_the_candidate(tmp_path):
    """The README's three commands as printed: the demo on its default (wan) profile,
    then the example budget against each run."""
    from pathlib import Path

    budget = str(Path(__file__).resolve().parents[2] / "examples" / "budget-demo.toml")
    store = str(tmp_path / "demo.db")
    done = hoptrace(
        "demo", "--requests", "12", "--warmup", "2", "--no-overhead", "--store", store,
        timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    base = hoptrace("check", store, "--run", "*:baseline", "--budget", budget)
    assert base.returncode == 0, base.stdout
    assert base.stdout.count("PASS") == 7
    cand = hoptrace("check", store, "--run", "*:candidate", "--budget", budget)
    assert cand.returncode == 1, cand.stdout
    assert [line.split()[1:3] for line in cand.stdout.splitlines() if line.startswith("FAIL")] == [
        ["stage.network", "share_max"]
    ]
