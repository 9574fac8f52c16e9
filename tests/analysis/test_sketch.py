"""Percentiles past the exact limit come from a mergeable DDSketch within 1%; shares
and means stay exact, and under the limit nothing changes."""

from __future__ import annotations

import math
import os
import pickle
import random

import numpy as np
import orjson
import pytest
from ddsketch import DDSketch

from tests.helpers import hoptrace
from tests.synthetic import SEED_MS, chain_trace, to_otlp_json
from tracer._errors import ConfigError
from tracer.analysis import TraceSet, analyze, what_if
from tracer.analysis.render import analysis_dict
from tracer.analysis.sampling._sketch import RELATIVE_ACCURACY, Sketch, exact_traces
from tracer.analysis.whatif.retime import Projection

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
ALPHA = RELATIVE_ACCURACY


def _traceset(count: int, seed: int = 4) -> TraceSet:
    rng = random.Random(seed)
    traces = TraceSet()
    for i in range(count):
        ms = {k: v * rng.lognormvariate(0, 0.6) for k, v in SEED_MS.items()}
        traces.add(chain_trace(f"{i + 1:032x}", T0 + i * 900 * MS, ms, model_ttft_ms=90.0))
    return traces


def _within(value: float, sample: np.ndarray, q: float) -> bool:
    """``value`` is within the sketch's accuracy of the sample's order statistics
    around quantile ``q`` (what DDSketch guarantees)."""
    ordered = np.sort(sample)
    rank = q * (ordered.size - 1)
    lo, hi = ordered[math.floor(rank)], ordered[math.ceil(rank)]
    return lo * (1 - ALPHA) - 1e-9 <= value <= hi * (1 + ALPHA) + 1e-9


def test_the_vectorised_sketch_equals_ddsketch_fed_one_value_at_a_time():
    values = np.random.default_rng(1).lognormal(5, 1.2, 20_000)
    reference = DDSketch(ALPHA)
    for v in values.tolist():
        reference.add(v)
    ours = Sketch.of(values)
    for q in (0.01, 0.5, 0.9, 0.99, 0.999):
        assert ours.quantile(q) == pytest.approx(reference.get_quantile_value(q), rel=1e-12)
        assert _within(ours.quantile(q), values, q)


def test_merged_part_sketches_equal_the_whole_and_survive_pickling():
    values = np.random.default_rng(2).exponential(300.0, 50_000)
    whole = Sketch.of(values)
    merged = Sketch()
    for part in np.array_split(values, 5):
        merged.merge(pickle.loads(pickle.dumps(Sketch.of(part))))  # as a worker sends it
    assert merged.count == whole.count == values.size
    for q in (0.5, 0.9, 0.99):
        assert merged.quantile(q) == whole.quantile(q)
        assert _within(merged.quantile(q), values, q)


def test_past_the_limit_percentiles_are_within_one_percent_and_shares_exact():
    traces = _traceset(400)
    exact = analyze(traces)
    sketched = analyze(traces, exact_traces=100)
    assert not exact.sketched and sketched.sketched
    e2e = exact.columns.e2e_ns / 1e6
    for key, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        value = getattr(sketched.e2e, key)
        assert _within(value, e2e, q)
        assert value != getattr(exact.e2e, key)  # really from the sketch
    assert sketched.e2e.mean == exact.e2e.mean and sketched.e2e.max == exact.e2e.max
    for got, want in zip(sketched.groups, exact.groups, strict=True):
        assert (got.name, got.share, got.mean_ms) == (want.name, want.share, want.mean_ms)
        assert got.p90_ms == pytest.approx(want.p90_ms, rel=0.03)
    assert sketched.warnings.messages[-1].startswith(
        "percentiles to within 1% (DDSketch) past 100 traces"
    )
    assert not any("DDSketch" in m for m in exact.warnings.messages)


def test_under_the_limit_the_output_is_the_exact_one():
    traces = _traceset(120)
    assert analysis_dict(analyze(traces, exact_traces=120)) == analysis_dict(analyze(traces))


def test_whatif_past_the_limit_says_so_and_stays_within_the_error():
    traces = _traceset(300)
    exact = what_if(traces, "inference", 10.0)
    a = analyze(traces, projection=Projection("inference", 10.0))
    sketched = Projection("inference", 10.0).result(a.columns, a.loaded, a.tally, 50)
    assert any("DDSketch" in m for m in sketched.messages)
    after = a.columns.projected.after_ns / 1e6
    assert _within(sketched.after.p90, after, 0.9)
    assert sketched.after_groups == exact.after_groups  # shares stay exact


def test_a_bad_limit_is_a_config_error(monkeypatch):
    with pytest.raises(ConfigError, match="exact_traces must be a positive"):
        exact_traces(0)
    monkeypatch.setenv("HOPTRACE_EXACT_TRACES", "lots")
    with pytest.raises(ConfigError, match="HOPTRACE_EXACT_TRACES must be a positive"):
        exact_traces()
    monkeypatch.setenv("HOPTRACE_EXACT_TRACES", "1_000")
    assert exact_traces() == 1000
    assert exact_traces(7) == 7  # the keyword wins


def test_cli_notes_the_sketch_and_rejects_a_bad_limit(tmp_path):
    path = tmp_path / "t.jsonl"
    batches = list(_traceset(60).traces.values())
    path.write_bytes(b"".join(orjson.dumps(to_otlp_json(b)) + b"\n" for b in batches))
    env = {**os.environ, "HOPTRACE_EXACT_TRACES": "20"}
    done = hoptrace("analyze", str(path), "--format", "json", env=env)
    assert done.returncode == 0, done.stderr
    messages = orjson.loads(done.stdout)["warnings"]["messages"]
    assert (
        "percentiles to within 1% (DDSketch) past 20 traces, the tail cut at the sketched P90; "
        "shares and means are exact"
    ) in messages
    done = hoptrace("analyze", str(path), env={**os.environ, "HOPTRACE_EXACT_TRACES": "-3"})
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "hoptrace: error: HOPTRACE_EXACT_TRACES must be a positive number of traces, got '-3'"
    ]


def test_past_the_limit_the_tail_keeps_the_traces_in_the_p90_bucket():
    # Every trace takes 1604 ms: the sketched P90 is its bucket's value, about 1% above
    # 1604. The tail must still hold the traces of that bucket, not none of them.
    ms = {k: v * 1604 / 1600 for k, v in SEED_MS.items()}
    traces = TraceSet()
    for i in range(30):
        traces.add(chain_trace(f"{i + 1:032x}", T0 + i * 900 * MS, ms, model_ttft_ms=90.0))
    exact = analyze(traces)
    sketched = analyze(traces, exact_traces=1)
    assert sketched.sketched and sketched.e2e.p90 > sketched.e2e.max  # the bucket's value
    for got, want in zip(sketched.groups, exact.groups, strict=True):
        assert got.tail_share == pytest.approx(want.tail_share) and want.tail_share > 0


def test_a_limit_of_odd_digits_is_a_config_error(monkeypatch):
    monkeypatch.setenv("HOPTRACE_EXACT_TRACES", "²")  # str.isdigit says yes, int() no
    with pytest.raises(ConfigError, match="HOPTRACE_EXACT_TRACES must be a positive"):
        exact_traces()
