"""The load simulation on systems whose answer is known: an M/M/c queue, closed loops
with one saturated station, and processor sharing below capacity."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from tracer.analysis.whatif.simulate import ACQUIRE, CPU, DELAY, MARK, RELEASE, Step, simulate

MS = 1e6


def _erlang_c_response_s(arrival: float, service_s: float, servers: int) -> float:
    a = arrival * service_s
    rho = a / servers
    below = sum(a**k / math.factorial(k) for k in range(servers))
    top = a**servers / math.factorial(servers) / (1 - rho)
    waiting = top / (below + top)
    return waiting / (servers / service_s - arrival) + service_s


def test_an_mmc_queue_waits_as_erlang_c_says():
    rng = random.Random(7)
    templates = [
        [
            Step(ACQUIRE, pool="p"),
            Step(DELAY, rng.expovariate(1 / (0.3e9))),
            Step(RELEASE, pool="p"),
        ]
        for _ in range(20_000)
    ]
    got = simulate(
        templates, cores=1, pools={"p": 3}, arrival_per_s=8.0, requests=30_000, warmup=2_000
    )
    expected = _erlang_c_response_s(8.0, 0.3, 3)  # rho 0.8: 0.624 s
    assert statistics.mean(got.e2e_ns) / 1e9 == pytest.approx(expected, rel=0.04)
    assert got.utilization["p"] == pytest.approx(0.8, abs=0.02)
    assert got.throughput_per_s == pytest.approx(8.0, rel=0.03)


@pytest.mark.parametrize("cores", [1, 2])
def test_a_closed_loop_on_a_saturated_cpu_runs_at_the_cpus_capacity(cores):
    # 5 clients, 10 ms of CPU each: X = cores / 10 ms, R = N x 10 ms / cores (Little).
    got = simulate([[Step(CPU, 10 * MS)]], cores=cores, clients=5, requests=1000, warmup=50)
    assert got.throughput_per_s == pytest.approx(100.0 * cores)
    assert statistics.mean(got.e2e_ns) / MS == pytest.approx(50.0 / cores)
    assert got.utilization["cpu"] == pytest.approx(1.0)


def test_a_closed_loop_through_a_saturated_pool_queues_for_it():
    # 16 clients, 4 slots held 100 ms, 20 ms outside: X = 40/s, R = 16/40 s = 400 ms.
    steps = [Step(DELAY, 20 * MS), Step(ACQUIRE, pool="gw"), Step(DELAY, 100 * MS)]
    steps.append(Step(RELEASE, pool="gw"))
    got = simulate([steps], cores=2, pools={"gw": 4}, clients=16, requests=800, warmup=64)
    assert got.throughput_per_s == pytest.approx(40.0, rel=0.01)
    assert statistics.mean(got.e2e_ns) / MS == pytest.approx(400.0, rel=0.01)
    assert got.utilization["gw"] == pytest.approx(1.0, abs=0.01)


def test_below_capacity_a_burst_gets_a_whole_core_and_the_mark_is_kept():
    steps = [Step(DELAY, 5 * MS), Step(MARK), Step(CPU, 3 * MS), Step(DELAY, 2 * MS)]
    got = simulate([steps], cores=2, clients=2, requests=100, warmup=10)
    assert got.e2e_ns == pytest.approx((10 * MS,) * 100)
    assert got.ttft_ns == pytest.approx((5 * MS,) * 100)


def test_processor_sharing_slows_every_burst_when_more_run_than_cores():
    # 4 clients on 2 cores, 10 ms of CPU each, all at once: each gets half a core.
    got = simulate([[Step(CPU, 10 * MS)]], cores=2, clients=4, requests=4, warmup=0)
    assert got.e2e_ns == pytest.approx((20 * MS,) * 4)


def test_a_process_of_one_event_loop_gets_one_core_however_many_are_free():
    # 4 clients, 10 ms of CPU each, all in one process of one loop, on 2 cores: the
    # process is the bottleneck, X = 1 core / 10 ms = 100/s and R = 4 x 10 ms = 40 ms;
    # unlimited, the two cores serve 200/s.
    steps = [[Step(CPU, 10 * MS, pool="app")]]
    capped = simulate(steps, cores=2, clients=4, loops={"app": 1}, requests=1000, warmup=50)
    assert capped.throughput_per_s == pytest.approx(100.0, rel=0.005)
    assert statistics.mean(capped.e2e_ns) / MS == pytest.approx(40.0, rel=0.005)
    assert capped.utilization["cpu"] == pytest.approx(0.5, rel=0.005)
    free = simulate(steps, cores=2, clients=4, requests=1000, warmup=50)
    assert free.throughput_per_s == pytest.approx(200.0, rel=0.005)
    # Two requests at once through two processes of one loop each, 10 ms in each: they
    # share a's core, then b's, 40 ms each, where two free cores take 20 ms.
    two = [[Step(CPU, 10 * MS, pool="a"), Step(CPU, 10 * MS, pool="b")]]
    got = simulate(two, cores=2, clients=2, loops={"a": 1, "b": 1}, requests=4, warmup=0)
    assert got.e2e_ns == pytest.approx((40 * MS,) * 4)
    got = simulate(two, cores=2, clients=2, requests=4, warmup=0)
    assert got.e2e_ns == pytest.approx((20 * MS,) * 4)


def test_what_a_capped_process_cannot_use_goes_to_the_others():
    # On 2 cores at once: 3 bursts of 30 ms in one loop (a core among them: 10 ms of
    # work each per 30 ms) and one of 30 ms elsewhere, which gets the other whole core
    # (processor sharing alone would give each of the four half a core).
    steps = [[Step(CPU, 30 * MS, pool="app")]] * 3 + [[Step(CPU, 30 * MS)]]
    got = simulate(
        steps, cores=2, schedule=[(0.0, i) for i in range(4)], loops={"app": 1},
        requests=4, warmup=0,
    )  # fmt: skip
    assert sorted(got.e2e_ns) == pytest.approx([30 * MS, 90 * MS, 90 * MS, 90 * MS])


def test_a_loop_takes_its_bursts_in_turn_where_sharing_finishes_them_together():
    # Three requests reach one loop at once, 10 ms of CPU each, on 2 cores: taken in
    # turn they leave at 10, 20 and 30 ms; shared, all three at 30 ms (a third of a
    # core each). The mean is lower in turn, the last one as late.
    def run(loop):
        steps = [[Step(CPU, 10 * MS, pool="app", loop=loop)]]
        got = simulate(
            steps, cores=2, schedule=[(0.0, 0)] * 3, loops={"app": 1}, requests=3, warmup=0
        )
        return sorted(got.e2e_ns)

    assert run(True) == pytest.approx([10 * MS, 20 * MS, 30 * MS])
    assert run(False) == pytest.approx([30 * MS] * 3)


def test_a_loop_of_two_processes_takes_two_bursts_at_once():
    steps = [[Step(CPU, 10 * MS, pool="app", loop=True)]]
    got = simulate(steps, cores=2, schedule=[(0.0, 0)] * 3, loops={"app": 2}, requests=3, warmup=0)
    assert sorted(got.e2e_ns) == pytest.approx([10 * MS, 10 * MS, 20 * MS])


def test_a_loop_burst_shares_its_process_with_the_process_s_other_threads():
    # One loop burst and one burst of another thread of the same process (an
    # exporter), 10 ms each, at once: the process's one core is shared, so both take
    # 20 ms; two loop bursts would have taken 10 and 20 ms.
    steps = [[Step(CPU, 10 * MS, pool="app", loop=True)], [Step(CPU, 10 * MS, pool="app")]]
    got = simulate(
        steps, cores=2, schedule=[(0.0, 0), (0.0, 1)], loops={"app": 1}, requests=2, warmup=0
    )
    assert got.e2e_ns == pytest.approx([20 * MS] * 2)
    # In a closed loop on a saturated loop, taken in turn: X = 1 core / 10 ms, as shared.
    one = [[Step(CPU, 10 * MS, pool="app", loop=True)]]
    busy = simulate(one, cores=2, clients=4, loops={"app": 1}, requests=1000, warmup=50)
    assert busy.throughput_per_s == pytest.approx(100.0, rel=0.005)
    assert statistics.mean(busy.e2e_ns) / MS == pytest.approx(40.0, rel=0.005)


def test_a_loop_step_outside_any_named_loop_is_shared_as_any_burst():
    steps = [[Step(CPU, 10 * MS, pool="elsewhere", loop=True)]]
    got = simulate(steps, cores=1, schedule=[(0.0, 0)] * 2, loops={"app": 1}, requests=2, warmup=0)
    assert got.e2e_ns == pytest.approx([20 * MS] * 2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cores": 1}, "exactly one of clients"),
        ({"cores": 1, "clients": 1, "arrival_per_s": 1.0}, "exactly one of clients"),
        ({"cores": 0, "clients": 1}, "cores must be positive"),
        ({"cores": 1, "clients": 1, "pools": {"p": 0}}, "at least one slot"),
        ({"cores": 1, "clients": 1, "loops": {"app": 0.5}}, "run on a core at least"),
    ],
)
def test_bad_settings_are_refused_with_the_reason(kwargs, message):
    with pytest.raises(ValueError, match=message):
        simulate([[Step(DELAY, 1.0)]], **kwargs)
