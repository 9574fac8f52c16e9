"""The tracing-cost numbers are traced minus untraced, medians over the pairs."""

from __future__ import annotations

import pytest

from demo_app.overhead import HOPS, Overhead, PairResult


def test_overhead_is_traced_minus_untraced_median_over_pairs():
    pairs = (
        PairResult(10.0, 9.0, 20.0, 18.0, 100.0, 100.0),
        PairResult(10.6, 9.0, 20.0, 19.0, 95.0, 100.0),
        PairResult(9.2, 9.0, 20.0, 17.0, 90.0, 100.0),
    )
    o = Overhead(1, 100, "ack", pairs)
    assert o.per_request_ms("p50") == pytest.approx(1.0)
    assert o.per_hop_ms("p50") == pytest.approx(1.0 / HOPS)
    assert o.spread_ms("p50") == pytest.approx((0.2, 1.6))
    assert o.per_request_ms("p90") == pytest.approx(2.0)
    assert o.throughput_lost() == pytest.approx(0.05)


def test_cpu_added_is_the_median_of_the_pairs_and_none_without_proc():
    pairs = (
        PairResult(1, 1, 1, 1, 1, 1, traced_cpu_ms=5.0, untraced_cpu_ms=4.0),
        PairResult(1, 1, 1, 1, 1, 1, traced_cpu_ms=5.5, untraced_cpu_ms=4.0),
        PairResult(1, 1, 1, 1, 1, 1, traced_cpu_ms=4.2, untraced_cpu_ms=4.0),
    )
    assert Overhead(1, 10, "ack", pairs).cpu_per_request_ms() == pytest.approx(1.0)
    assert Overhead(1, 10, "ack", (PairResult(1, 1, 1, 1, 1, 1),)).cpu_per_request_ms() is None
