"""The knee of a sweep: the first level where the added clients bought little
throughput while latency grew, on synthetic sweeps."""

from __future__ import annotations

import pytest

from tracer.analysis.checks.sweep import FLAT_SHARE, LATENCY_GROWTH, find_knee
from tracer.analysis.render import bench_dict, bench_sections, to_table
from tracer.bench import BenchResult, LevelResult, Sample

N = 20


def _level(c: int, rps: float, p50_ms: float, p90_ms: float) -> LevelResult:
    """A level of N requests at ``rps`` whose e2e P50 and P90 are ``p50_ms``, ``p90_ms``
    (half the requests at P50, the rest spread to just past P90)."""
    low = [p50_ms] * (N // 2 + 1)
    high = [p90_ms] * (N - len(low))
    samples = [Sample(f"{i:032x}", "200", ms, None, (), 8) for i, ms in enumerate(low + high)]
    level = LevelResult(c, f"r-c{c}", samples, N / rps)
    e2e = level.e2e()
    assert e2e.p50 == pytest.approx(p50_ms) and e2e.p90 == pytest.approx(p90_ms)
    return level


def _flattening_sweep() -> list[LevelResult]:
    """Requests/s 0.43, 0.86, 1.68, 1.72 at 1, 2, 4, 8 clients; P50 doubles and P90
    grows 1.92x from c=1 to c=8 (requests/s is about clients over latency)."""
    return [
        _level(1, 0.43, 2300.0, 2500.0),
        _level(2, 0.86, 2320.0, 2530.0),
        _level(4, 1.68, 2380.0, 2600.0),
        _level(8, 1.72, 4650.0, 4800.0),
    ]


def test_flattening_throughput_with_doubled_p50_is_a_knee_at_the_first_flat_level():
    knee = find_knee(_flattening_sweep())
    assert knee is not None
    # From 4 to 8 clients each added one bought 0.01 req/s: 2.3% of one client's 0.43.
    assert (knee.concurrency, knee.from_concurrency) == (8, 4)
    assert knee.marginal_share == pytest.approx((1.72 - 1.68) / 4 / 0.43)
    assert knee.marginal_share < FLAT_SHARE
    assert knee.p50_ratio == pytest.approx(4650 / 2300)
    assert knee.p90_ratio == pytest.approx(1.92)  # under the old 2x-P90 rule: no knee


def test_linear_scaling_has_no_knee_even_when_latency_grows():
    levels = [
        _level(1, 1.0, 100.0, 120.0),
        _level(2, 2.0, 110.0, 130.0),
        _level(4, 3.9, 160.0, 200.0),  # slower, but each added client still buys 95%
    ]
    assert find_knee(levels) is None


def test_flat_throughput_without_latency_growth_is_no_knee():
    # A noisy flat step with latency within LATENCY_GROWTH of the lowest level's.
    levels = [_level(1, 1.0, 100.0, 120.0), _level(2, 1.1, 110.0, 130.0)]
    assert 110.0 / 100.0 < LATENCY_GROWTH
    assert find_knee(levels) is None


def test_a_throughput_drop_with_latency_growth_is_a_knee():
    levels = [
        _level(1, 1.0, 100.0, 120.0),
        _level(2, 1.9, 105.0, 125.0),
        _level(4, 1.5, 260.0, 400.0),
    ]
    knee = find_knee(levels)
    assert knee is not None and knee.concurrency == 4 and knee.marginal_share < 0


def test_p90_growth_alone_counts_as_latency_growth():
    levels = [_level(1, 1.0, 100.0, 120.0), _level(2, 1.2, 120.0, 190.0)]
    knee = find_knee(levels)
    assert knee is not None and knee.concurrency == 2
    assert knee.p50_ratio == pytest.approx(1.2) and knee.p90_ratio == pytest.approx(190 / 120)


def test_levels_without_a_success_are_left_out_and_one_level_has_no_knee():
    failed = LevelResult(16, "r-c16", [Sample("0" * 32, "500", 5.0, None, (), 0)], 1.0)
    assert find_knee([_level(1, 1.0, 100.0, 120.0), failed]) is None
    assert find_knee([_level(1, 1.0, 100.0, 120.0)]) is None


def test_knee_json_keeps_its_keys_and_adds_the_evidence():
    levels = _flattening_sweep()
    result = BenchResult("http://h/v1", 64, False, "r", levels, find_knee(levels))
    knee = bench_dict(result)["knee"]
    assert knee == {
        "concurrency": 8,
        "p90_ratio": pytest.approx(1.92),
        "stage": None,
        "stage_growth_ms": None,
        "from_concurrency": 4,
        "p50_ratio": pytest.approx(2.021739, abs=1e-6),
        "marginal_share": pytest.approx(0.023256, abs=1e-6),
    }


def test_knee_table_says_what_flattened_and_what_grew():
    levels = _flattening_sweep()
    result = BenchResult("http://h/v1", 64, False, "r", levels, find_knee(levels))
    text = " ".join(to_table(bench_sections(result), width=200).split())
    assert (
        "knee at concurrency 8: the clients added from 4 each bought 2% of one client's "
        "requests/s at the lowest level while P50 is 2.02x and P90 1.92x the lowest level's"
    ) in text
    result.knee = None
    text = " ".join(to_table(bench_sections(result), width=200).split())
    assert "no knee: at every level the added clients each bought at least 25%" in text


def test_one_level_has_no_knee_to_look_for_and_says_so():
    (level, *_) = _flattening_sweep()
    result = BenchResult("http://h/v1", 64, False, "r", [level], find_knee([level]))
    text = " ".join(to_table(bench_sections(result), width=200).split())
    assert "no knee: one concurrency level; give --concurrency two or more" in text
    assert "at every level" not in text
