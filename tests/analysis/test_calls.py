"""More calls of a stage on runs whose answer is known: N calls in sequence on an idle
chain add N-1 times the call's time (both models); best-of-N of a stage with a known
distribution takes the expected maximum of N draws; a pool that sees N times the calls
saturates where the arithmetic says; the most calls that fit an SLO."""

from __future__ import annotations

import pytest

from tests.analysis.test_loadmodel import T0, _pool_run, _traceset
from tests.synthetic import chain_trace
from tracer import attributes as attrs
from tracer._errors import ConfigError
from tracer.analysis.checks.slo import parse_slo
from tracer.analysis.whatif.afford import Afford, most_calls
from tracer.analysis.whatif.answer import Question
from tracer.analysis.whatif.loadmodel import project_load
from tracer.analysis.whatif.loadrun import load_run
from tracer.analysis.whatif.retime import Projection, what_if
from tracer.analysis.whatif.scenario import (
    ONE,
    Calls,
    Combined,
    Fanout,
    Faster,
    Repeat,
    parse_calls,
)

S = 1_000_000_000


def _idle_chain(n: int = 30, inference=None, ttft: float | None = 200.0):
    """``n`` traces of the chain (1,600 ms, of it 1,020 ms in the call to the model: 20
    of network, 1,000 of inference), 10 s apart: nothing else runs."""
    traces = []
    for i in range(n):
        ms = None if inference is None else {"client": 10.0, "inference": inference(i)}
        traces.append(chain_trace(f"{i + 1:032x}", T0 + i * 10 * S, ms, model_ttft_ms=ttft))
    return _traceset(traces)


def test_scenarios_say_how_many_calls_and_combine():
    assert Repeat("inference", 3).calls("inference.decode") == Calls(3, False, "inference")
    assert Fanout("inference", 2).calls("inference") == Calls(2, True, "inference")
    assert Repeat("inference", 3).calls("context") == ONE == Faster("x", 2).calls("x")
    both = Combined((Faster("inference", 100), Repeat("inference", 2)))
    assert both.factor("inference.prefill") == pytest.approx(0.01)
    assert both.calls("inference") == Calls(2, False, "inference")
    assert both.describe() == "inference 100x faster and inference called 2 times in sequence"
    with pytest.raises(ConfigError, match="called more than once by two changes"):
        Combined((Repeat("inference", 2), Fanout("inference.decode", 3)))
    with pytest.raises(ConfigError, match="from 1 to 64"):
        Repeat("inference", 65)
    assert parse_calls("--repeat", "inference=max") == ("inference", None)
    assert parse_calls("--fanout", " inference = 3 ") == ("inference", 3)
    for bad in ("inference", "=2", "inference=0", "inference=two", "inference=2.5"):
        with pytest.raises(ConfigError, match="--fanout"):
            parse_calls("--fanout", bad)


def test_calls_in_sequence_on_an_idle_chain_add_n_minus_1_times_the_call():
    traces = _idle_chain()
    w = what_if(traces, "inference", 1.0, changes=(Repeat("inference", 3),))
    # The call is the app's inference span: 20 ms to the model and 1,000 in it.
    assert w.before.p50 == 1600.0 and w.after.p50 == pytest.approx(1600.0 + 2 * 1020.0)
    # The first token comes in the last call: after the two before it.
    assert w.ttft_after is not None and w.ttft_after.p50 == pytest.approx(640.0 + 2 * 1020.0)
    assert w.calls == (("inference", 3, False),) and not w.messages
    nothing = what_if(traces, "inference", 1.0, changes=(Repeat("disk", 3),))
    assert nothing.after == nothing.before
    assert nothing.messages == (
        "no span on the critical path is in stage 'disk': disk called 3 times in sequence "
        "changes nothing there",
    )
    # 10x faster too: each call 20 + 100 ms.
    fast = what_if(traces, "inference", 10.0, changes=(Repeat("inference", 3),))
    assert fast.after.p50 == pytest.approx(700.0 + 2 * 120.0)
    # The load model, on the same idle run (each request alone): the same.
    run = load_run(traces)
    assert not run.loaded
    got = project_load(run, Combined((Faster("inference", 10.0), Repeat("inference", 3))))
    assert got.after.p50 == pytest.approx(700.0 + 2 * 120.0, rel=1e-6)
    # Its first token: its own projection without the calls, plus the two before.
    alone = project_load(run, Faster("inference", 10.0))
    assert got.ttft_after is not None and alone.ttft_after is not None
    assert got.ttft_after.p50 == pytest.approx(alone.ttft_after.p50 + 2 * 120.0, rel=1e-6)


def _expected_max(values: list[float], n: int) -> float:
    """E[max of n draws] from the uniform distribution over ``values`` (distinct)."""
    ordered = sorted(values)
    m = len(ordered)
    return sum(v * (((k + 1) / m) ** n - (k / m) ** n) for k, v in enumerate(ordered))


@pytest.mark.parametrize("n", [2, 3, 5])
def test_best_of_n_takes_the_expected_maximum_of_n_calls(n):
    # The call takes 100..199 ms, each value on 4 of 400 traces: E[max of n] is known.
    traces = _idle_chain(400, inference=lambda i: 100.0 + i % 100, ttft=None)
    expected = _expected_max([100.0 + v for v in range(100)], n)
    w = what_if(traces, "inference", 1.0, changes=(Fanout("inference", n),))
    assert w.before.mean == pytest.approx(10.0 + 149.5)
    # Seeded draws from the run's own calls: within 2% of the expectation.
    assert w.after.mean - 10.0 == pytest.approx(expected, rel=0.02)
    loaded = project_load(load_run(traces), Fanout("inference", n))
    assert loaded.after.mean - 10.0 == pytest.approx(expected, rel=0.02)
    # Deterministic: the same draws again.
    again = what_if(traces, "inference", 1.0, changes=(Fanout("inference", n),))
    assert again.after == w.after


def test_best_of_n_waits_for_the_slowest_before_the_first_token():
    traces = _idle_chain()
    w = what_if(traces, "inference", 10.0, changes=(Fanout("inference", 3),))
    # All calls alike (1,020 ms): the slowest is as long; the first token comes after
    # it: 640 ms before less 180 of the faster model, then 120 - 30 of the call after
    # its own first token.
    assert w.after.p50 == pytest.approx(700.0)
    assert w.ttft_after is not None and w.ttft_after.p50 == pytest.approx(460.0 + 90.0)


@pytest.mark.parametrize("n", [2, 3])
def test_a_pool_with_n_times_the_calls_saturates_where_the_arithmetic_says(n):
    # 8 clients through an engine of 2 slots, each call holding one 100 ms: 20 calls/s,
    # so 20/n requests/s, and each client waits 8 / (20/n) s.
    run = load_run(_traceset(_pool_run()))
    for change in (Repeat("inference", n), Fanout("inference", n)):
        got = project_load(run, change)
        assert got.after.p50 == pytest.approx(400.0 * n, rel=0.02)
        assert got.throughput_after_per_s == pytest.approx(48 / 2.75 / n, rel=0.03)
        assert got.utilization_after["engine"] == pytest.approx(1.0, abs=0.01)


def test_an_open_loop_fills_its_pool_with_the_calls():
    # 5 requests/s into 2 slots of 100 ms (a 1 ms wait for one: the call holds the
    # slot from its queue on, 100 ms), 20 calls/s: n calls fill n/4 of the slots.
    traces = _pool_run(n=60, gap_ms=200.0, wait_ms=1.0)
    for spans in traces:
        del spans[0].attributes[attrs.BENCH_CONCURRENCY]
    run = load_run(_traceset(traces))
    assert run.clients is None
    for n in (2, 3):
        got = project_load(run, Repeat("inference", n))
        assert got.after.p50 == pytest.approx(100.0 * n, rel=0.01)  # no queue yet
        # Busy share over the window (the last request's calls end it).
        window = 59 * 0.2 + 0.1 * n
        assert got.utilization_after["engine"] == pytest.approx(60 * 0.1 * n / 2 / window, rel=0.02)


def test_the_most_calls_that_fit_an_slo():
    # Decode 10x faster: a call holds a slot 28 ms, so n calls answer 8 clients in
    # 8 x 28 n / 2 = 112 n ms; within 500 ms: 4 calls (448 ms), not 5 (560).
    traces = _traceset(_pool_run())
    question = Question(slo=parse_slo("e2e=500ms"))
    base = Projection("inference.decode", 10.0)
    w = most_calls(traces, base, "inference", False, question)
    assert isinstance(w.afford, Afford)
    assert w.afford.calls == 4 and w.afford.model == "load"
    assert w.afford.p50_ms == pytest.approx(448.0, rel=0.02)
    assert w.afford.attainment == 1.0 and w.afford.target == 0.9
    assert [n for n, _ in w.afford.tried] == [1, 2, 4, 8, 6, 5]
    assert w.change == "inference.decode 10x faster and inference called 4 times in sequence"
    assert w.afford.describe().startswith(
        "within e2e <= 500 ms for 90% of requests, 4 inference calls in sequence fit: P50 448 ms"
    )
    # Retimed trace by trace, each call keeps its 300 ms wait: one call (328 ms) fits,
    # two (656) do not.
    retimed = most_calls(traces, base, "inference", False, Question("retime", slo=question.slo))
    assert isinstance(retimed.afford, Afford)
    assert retimed.afford.calls == 1 and retimed.afford.model == "retime"
    assert retimed.afford.tried == ((1, 1.0), (2, 0.0))
    assert retimed.afford.p50_ms == 328.0 and retimed.afford.goodput_per_s is None
    with pytest.raises(ConfigError, match="needs --slo"):
        most_calls(traces, base, "inference", True, Question())
