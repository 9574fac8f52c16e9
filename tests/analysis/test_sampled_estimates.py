"""Traces kept by the consistent probability sampler estimate the whole traffic: the
intervals of shares and percentiles cover the full set's values (seeded, 200 times)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.synthetic import SEED_MS, chain_trace
from tracer.analysis.aggregate import Analysis, aggregate_columns, analyze
from tracer.analysis.model.traceset import TraceSet
from tracer.analysis.sampling.estimate import CONFIDENCE
from tracer.sampling.samplers import ConsistentProbabilitySampler
from tracer.sampling.threshold import adjusted_count, parse_tracestate_threshold
from tracer.spans.model import Warnings

N = 10_000
REPETITIONS = 200
_LOW56 = (1 << 56) - 1


def _stage_ms(rng: np.random.Generator, n: int) -> list[dict[str, float]]:
    """Per trace, each stage's and hop's ms: the seed story with lognormal spread."""
    spread = rng.lognormal(0.0, 0.45, size=(n, len(SEED_MS)))
    base = np.array(list(SEED_MS.values()))
    return [dict(zip(SEED_MS, row, strict=True)) for row in (spread * base).tolist()]


@pytest.fixture(scope="module")
def population() -> tuple[list[dict[str, float]], Analysis]:
    """10,000 chain traces and the analysis of all of them."""
    ms = _stage_ms(np.random.default_rng(2026), N)
    ts = TraceSet()
    for i, d in enumerate(ms):
        ts.add(chain_trace(f"{i + 1:032x}", 1_700_000_000_000_000_000 + i * 5_000_000, d))
    return ms, analyze(ts)


def _sampled(full: Analysis, keep: np.ndarray, weight: float) -> Analysis:
    cols = full.columns.subset(keep)
    cols = cols.replace(weight=np.full(int(keep.sum()), weight))
    return aggregate_columns(cols, "stage", Warnings(), Warnings())


def _figures(a: Analysis) -> dict[str, tuple[float, float, float]]:
    """(estimate, low, high) of every stage's share, P50 and P90, and the end-to-end
    P50 and P90."""
    out = {}
    for g in a.groups:
        for key in ("share", "p50_ms", "p90_ms"):
            iv = g.intervals[key] if g.intervals else None
            value = getattr(g, key)
            out[f"{g.name} {key}"] = (value, iv.low if iv else value, iv.high if iv else value)
    for key in ("p50", "p90"):
        iv = a.e2e.intervals[key] if a.e2e.intervals else None
        value = getattr(a.e2e, key)
        out[f"e2e {key}"] = (value, iv.low if iv else value, iv.high if iv else value)
    return out


@pytest.mark.parametrize("ratio", [0.1, 0.01])
def test_intervals_cover_the_full_sets_values_in_at_least_95_of_200_samples(population, ratio):
    ms, full = population
    truth = {name: value for name, (value, _, _) in _figures(full).items()}
    sampler = ConsistentProbabilitySampler(ratio)
    rng = np.random.default_rng(int(ratio * 1000))
    covered = dict.fromkeys(truth, 0)
    widths: dict[str, list[float]] = {name: [] for name in truth}
    kept_counts = []
    for rep in range(REPETITIONS):
        # A fresh trace id per trace and repetition, as the SDK draws them (random).
        low = rng.integers(0, _LOW56, size=N, dtype=np.int64, endpoint=True)
        if rep == 0:  # the sampler itself decides exactly as the threshold rule
            decisions = [
                sampler.should_sample(None, (0xA5 << 64) | int(v), "root") for v in low.tolist()
            ]
            kept_states = {d.trace_state.to_header() for d in decisions if d.decision.is_sampled()}
            (state,) = kept_states  # every kept root writes the same threshold
            threshold = parse_tracestate_threshold(state)
            assert threshold is not None
            expected = np.array([d.decision.is_sampled() for d in decisions])
            assert (expected == (low >= threshold)).all()
        keep = low >= threshold
        kept_counts.append(int(keep.sum()))
        sample = _sampled(full, keep, adjusted_count(threshold))
        for name, (_, lo, hi) in _figures(sample).items():
            covered[name] += lo <= truth[name] <= hi
            widths[name].append(hi - lo)
    print(
        f"\nsample ratio {ratio:g}: {np.mean(kept_counts):.0f} traces kept on average "
        f"of {N:,}; {CONFIDENCE:.0%} intervals over {REPETITIONS} samples"
    )
    for name in truth:
        unit = "" if name.endswith("share") else " ms"  # a share in percent
        scale = 100 if name.endswith("share") else 1
        print(
            f"  {name:<22} full {truth[name] * scale:9.2f}{unit or ' %'}  covered "
            f"{covered[name] / REPETITIONS:6.1%}  mean width {np.mean(widths[name]) * scale:8.2f}"
            f"{unit or ' points'}"
        )
    low_coverage = {n: c / REPETITIONS for n, c in covered.items() if c < 0.95 * REPETITIONS}
    assert not low_coverage
    # The intervals are not trivially wide: narrower at 10% than at 1%, and a share's
    # under a tenth of the share itself at 10%.
    if ratio == 0.1:
        assert np.mean(widths["inference share"]) < 0.1 * truth["inference share"]


def test_the_analyzer_reads_the_weight_from_the_root_spans_trace_state(population):
    ms, full = population
    sampler = ConsistentProbabilitySampler(0.1)
    rng = np.random.default_rng(11)
    low = rng.integers(0, _LOW56, size=N, dtype=np.int64, endpoint=True)
    ts = TraceSet()
    keep = np.zeros(N, bool)
    for i, (d, r) in enumerate(zip(ms, low.tolist(), strict=True)):
        decision = sampler.should_sample(None, (0xA5 << 64) | r, "root")
        if decision.decision.is_sampled():
            keep[i] = True
            state = decision.trace_state.to_header()
            start = 1_700_000_000_000_000_000 + i * 5_000_000
            ts.add(chain_trace(f"{i + 1:032x}", start, d, trace_state=state))
    read = analyze(ts)
    threshold = parse_tracestate_threshold("ot=th:e666")
    assert threshold is not None
    direct = _sampled(full, keep, adjusted_count(threshold))
    assert read.sample is not None and read.sample.kept == int(keep.sum())
    assert read.sample.estimated_traces == pytest.approx(keep.sum() * adjusted_count(threshold))
    assert read.sample.interval.low < N < read.sample.interval.high
    got, want = _figures(read), _figures(direct)
    assert got.keys() == want.keys()
    for name in want:
        assert got[name] == pytest.approx(want[name], rel=1e-9)


def test_full_data_has_no_intervals(population):
    _, full = population
    assert full.sample is None and full.columns.weight is None
    assert full.e2e.intervals is None
    assert all(g.intervals is None for g in full.groups)
