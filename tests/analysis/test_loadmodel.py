"""The what-if under load on runs whose answer is known: a closed loop through a
saturated engine pool drains its queue when the engine is faster; the CLI says which
model it used and why."""

from __future__ import annotations

from dataclasses import replace

import orjson
import pytest

from tests.helpers import hoptrace
from tests.synthetic import to_otlp_json
from tracer import attributes as attrs
from tracer.analysis import TraceSet
from tracer.analysis.checks.slo import parse_slo
from tracer.analysis.whatif.expand import expand_templates
from tracer.analysis.whatif.loadgraph import Stretch
from tracer.analysis.whatif.loadmodel import (
    CPU_FULL,
    CPU_SCALING,
    FANOUT_RELAY_SPEED,
    LOOP_PIECE_MS,
    PARALLEL_BUSY,
    SPEED_CPU_SCALING,
    LoadWhatIf,
    _steps,
    project_load,
)
from tracer.analysis.whatif.loadrun import LoadRun, load_run
from tracer.analysis.whatif.scenario import Combined, Fanout, Faster, Repeat, Scenario
from tracer.analysis.whatif.simulate import CPU, DELAY
from tracer.spans.model import KIND_CLIENT, KIND_INTERNAL, KIND_SERVER, Span

T0 = 1_760_000_000_000_000_000
MS = 1_000_000


def _pool_run(
    n: int = 48, clients: int = 8, gap_ms: float = 50.0, wait_ms: float = 300.0
) -> list[list[Span]]:
    """A bench run of ``clients`` clients through an engine of 2 slots held 100 ms:
    20 requests/s, each waiting ``wait_ms`` in the queue (300 for 8 clients: a closed
    loop at saturation)."""
    traces = []
    for i in range(n):
        tid = f"{i + 1:032x}"
        start = T0 + int(i * gap_ms * MS)
        end = start + int((wait_ms + 100) * MS)
        root = Span(
            tid, f"{2 * i + 1:016x}", None, "bench", "bench request", KIND_INTERNAL,
            start, end, "client", 0, start + int((wait_ms + 25) * MS),
            {attrs.BENCH_CONCURRENCY: clients, attrs.RUN: "bench-x-c8"},
        )  # fmt: skip
        engine = Span(
            tid, f"{2 * i + 2:016x}", root.span_id, "model", "llm_request", KIND_SERVER,
            start, end, None, 0, None,
            {
                attrs.GEN_AI_LATENCY_QUEUE: wait_ms / 1000,
                attrs.GEN_AI_LATENCY_PREFILL: 0.02,
                attrs.GEN_AI_LATENCY_DECODE: 0.08,
                attrs.GEN_AI_LATENCY_TTFT: wait_ms / 1000 + 0.02,
                attrs.POOL_NAME: "engine",
                attrs.POOL_SIZE: 2,
            },
        )  # fmt: skip
        traces.append([root, engine])
    return traces


def _traceset(traces: list[list[Span]]) -> TraceSet:
    out = TraceSet()
    for spans in traces:
        out.add(spans)
    return out


def test_a_faster_engine_drains_the_queue_its_slots_made():
    run = load_run(_traceset(_pool_run()))
    assert run.clients == 8 and run.pools == {"engine": 2} and run.loaded
    # Decode 10x faster: the slots are held 28 ms, not 100; 2 slots answer 71.4/s, so
    # 8 clients see 8 / 71.4 = 112 ms. Retiming each trace alone keeps the 300 ms wait.
    projected = project_load(run, Faster("inference.decode", 10.0))
    assert projected.before.p50 == pytest.approx(400.0)
    assert projected.simulated_before.mean == pytest.approx(400.0, rel=0.01)
    assert projected.after.p50 == pytest.approx(112.0, rel=0.02)
    # Throughput over the run's measured window: 48 requests from the first start to
    # the last end (47 x 50 + 400 ms), 17.5/s; after, that times 71.4 / 20.
    assert projected.throughput_before_per_s == pytest.approx(48 / 2.75)
    assert projected.throughput_after_per_s == pytest.approx(48 / 2.75 * 71.4 / 20, rel=0.03)
    assert projected.bottleneck == "engine"
    assert projected.ttft_before is not None and projected.ttft_after is not None
    # The first token waits for a slot too: 112 - 28 = 84 ms after, then 20 ms of
    # prefill and 0.5 of the 5 ms of decode before the client's mark.
    assert projected.ttft_before.p50 == pytest.approx(325.0)
    assert projected.ttft_after.p50 == pytest.approx(104.5, rel=0.02)
    assert any("CPU contention is not modelled" in note for note in projected.notes)


def test_a_pool_of_unknown_size_keeps_its_waits_and_says_so():
    traces = _pool_run()
    for spans in traces:
        del spans[1].attributes[attrs.POOL_SIZE]
    run = load_run(_traceset(traces))
    assert run.pools == {} and run.unsized == ("engine",)
    projected = project_load(run, Faster("inference.decode", 10.0))
    assert projected.after.p50 == pytest.approx(400.0 - 72.0, rel=0.01)
    assert any("--capacity engine=N" in note for note in projected.notes)
    # Given the size, it drains again.
    sized = load_run(_traceset(traces), capacity={"engine": 2})
    assert project_load(sized, Faster("inference.decode", 10.0)).after.p50 == pytest.approx(
        112, rel=0.02
    )


@pytest.fixture
def files(tmp_path):
    loaded = tmp_path / "loaded.jsonl"
    loaded.write_bytes(b"\n".join(orjson.dumps(to_otlp_json(t)) for t in _pool_run()))
    # One request at a time, none waiting: nothing for a load model to change.
    idle = _pool_run(clients=1, gap_ms=500.0)
    for spans in idle:
        for key in (attrs.GEN_AI_LATENCY_QUEUE, attrs.POOL_SIZE, attrs.POOL_NAME):
            spans[1].attributes.pop(key)
        spans[1].attributes[attrs.GEN_AI_LATENCY_TTFT] = 0.02
    quiet = tmp_path / "idle.jsonl"
    quiet.write_bytes(b"\n".join(orjson.dumps(to_otlp_json(t)) for t in idle))
    few = tmp_path / "few.jsonl"
    few.write_bytes(b"\n".join(orjson.dumps(to_otlp_json(t)) for t in _pool_run(n=5)))
    return loaded, quiet, few


def test_whatif_picks_the_load_model_for_a_loaded_run_and_says_why(files):
    loaded, _, _ = files
    args = ("--stage", "inference.decode", "--speedup", "10", "--format", "json")
    proc = hoptrace("whatif", str(loaded), *args)
    assert proc.returncode == 0, proc.stderr
    assert "model: load, the run's load simulated: a closed loop of 8 clients" in proc.stderr
    out = orjson.loads(proc.stdout)
    assert out["model"] == "load" and out["bottleneck"]["resource"] == "engine"
    assert out["after_ms"]["p50"] == pytest.approx(112, rel=0.02)
    assert out["throughput_per_s"]["after"] == pytest.approx(48 / 2.75 * 71.4 / 20, rel=0.03)
    retimed = orjson.loads(hoptrace("whatif", str(loaded), *args, "--model", "retime").stdout)
    assert retimed["model"] == "retime"
    assert retimed["after_ms"]["p50"] == pytest.approx(328.0)


def test_whatif_retimes_a_run_without_load_and_refuses_a_load_model_of_too_few(files):
    _, quiet, few = files
    args = ("--stage", "inference.decode", "--speedup", "10", "--format", "json")
    proc = hoptrace("whatif", str(quiet), *args)
    assert proc.returncode == 0, proc.stderr
    assert "model: retime, each trace retimed on its own: 0.8 requests in flight" in proc.stderr
    assert orjson.loads(proc.stdout)["model"] == "retime"
    refused = hoptrace("whatif", str(few), *args, "--model", "load")
    assert refused.returncode != 0
    assert refused.stderr.strip().count("\n") == 0
    assert "needs at least 20 traces of one run, got 5" in refused.stderr


def test_the_slo_is_met_after_the_queue_drains_and_goodput_follows():
    run = load_run(_traceset(_pool_run()))
    projected = project_load(run, Faster("inference.decode", 10.0), slo=parse_slo("e2e=200ms"))
    # 400 ms before: no request meets 200 ms; 112 ms after: all of them do.
    assert projected.attainment == (0.0, 1.0)
    assert projected.goodput_per_s is not None
    assert projected.goodput_per_s[0] == 0.0
    assert projected.goodput_per_s[1] == pytest.approx(48 / 2.75 * 71.4 / 20, rel=0.03)


def test_a_bench_sweep_is_projected_level_by_level(tmp_path):
    two = _pool_run(clients=8)
    for spans in two:
        spans[0].attributes[attrs.RUN] = "bench-x-c8"
    four = _pool_run(clients=4, gap_ms=50.0, wait_ms=100.0)
    for n, spans in enumerate(four):
        for s in spans:
            s.trace_id = f"{n + 1000:032x}"
        spans[0].attributes[attrs.RUN] = "bench-x-c4"
    warm = _pool_run(n=8)
    for n, spans in enumerate(warm):
        for s in spans:
            s.trace_id = f"{n + 5000:032x}"
        spans[0].attributes[attrs.RUN] = "bench-x-warmup"
    path = tmp_path / "sweep.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(to_otlp_json(t)) for t in two + four + warm))
    proc = hoptrace(
        "whatif", str(path), "--stage", "inference.decode", "--speedup", "10",
        "--format", "json", "--slo", "e2e=200ms",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "model: load per level, 2 bench levels" in proc.stderr
    out = orjson.loads(proc.stdout)
    levels = out["levels"]
    # Both levels answer as many requests a second (the 2 slots), at twice the latency
    # at 8 clients: the knee is at 8, before and after (the slots stay the limit).
    assert out["knee"] == {"before": 8, "after": 8}
    assert [(lv["run"], lv["clients"]) for lv in levels] == [("bench-x-c4", 4), ("bench-x-c8", 8)]
    # 8 clients: 112 ms after; 4 clients through 2 slots held 28 ms: 56 ms.
    assert levels[1]["after_ms"]["p50"] == pytest.approx(112, rel=0.02)
    assert levels[0]["after_ms"]["p50"] == pytest.approx(56, rel=0.03)
    assert levels[1]["slo"]["attainment"] == {"before": 0.0, "after": 1.0}


def _one_client_run(n: int = 30, e2e_ms: float = 1000.0) -> list[list[Span]]:
    """One bench client sending requests back to back, each one model span of
    ``e2e_ms`` inside the client's."""
    traces = []
    for i in range(n):
        tid = f"{i + 1:032x}"
        start = T0 + int(i * e2e_ms * MS)
        end = start + int(e2e_ms * MS)
        root = Span(
            tid, f"{2 * i + 1:016x}", None, "bench", "bench request", KIND_INTERNAL,
            start, end, "client", 0, None, {attrs.BENCH_CONCURRENCY: 1, attrs.RUN: "bench-x-c1"},
        )  # fmt: skip
        model = Span(
            tid, f"{2 * i + 2:016x}", root.span_id, "model", "generate", KIND_SERVER,
            start, end, "inference", 0, None, {},
        )  # fmt: skip
        traces.append([root, model])
    return traces


def test_half_the_cpu_runs_in_line_with_the_waits_and_half_beside_them():
    # 1,000 ms requests, 100 ms of CPU each, eight idle cores: the model 10x faster
    # leaves (1000 - 50) / 10 = 95 ms of waiting, with a tenth of the in-line half of
    # the CPU paced through it; the other nine tenths join the half beside, paced
    # through the same 95 ms from the stretch's start: the request ends with them.
    # CPU per request falls with throughput as (x / 1000) ** 0.3, less than the faster
    # stage's own 10 ** -0.13 (0.74) for any x under 368 ms, and the two are not both
    # taken: the fixed point x = 95 + 95 (x / 1000) ** 0.3 is 148.6 ms. The CPU beside
    # left to hide behind the waits (one branch from the request's start) would give
    # about 96 ms (x = 95 + 5 (x / 1000) ** 0.3).
    run = load_run(_traceset(_one_client_run()), cores=8.0, cpu_ms_per_request=100.0)
    assert run.clients == 1 and run.cores == 8.0
    projected = project_load(run, Faster("inference", 10.0))
    assert projected.before.p50 == pytest.approx(1000.0)
    assert projected.after.p50 == pytest.approx(148.6, rel=0.005)
    # A stage made slower keeps its CPU in line: twice as slow, 2 x 950 + 50.
    slower = project_load(run, Faster("inference", 0.5))
    assert slower.after.p50 == pytest.approx(1950.0, rel=0.01)


def _two_process_run(n: int = 30, caller: bool = False) -> list[list[Span]]:
    """One client, 1,000 ms requests: the client's own 100 ms (80 ms of its CPU a
    request) and a model server's 900 ms (20 ms of its CPU a request); with ``caller``,
    the client calls the model in a span of its own in ``inference``."""
    traces = []
    for i in range(n):
        tid = f"{i + 1:032x}"
        start = T0 + i * 1000 * MS
        end = start + 1000 * MS
        root = Span(
            tid, f"{2 * i + 1:016x}", None, "bench", "bench request", KIND_INTERNAL,
            start, end, "client", 0, None,
            {attrs.BENCH_CONCURRENCY: 1, attrs.RUN: "bench-x-c1", attrs.HOST_CPUS: 8,
             attrs.PROCESS_CPU_TOTAL_NS: (i + 1) * 80 * MS},
        )  # fmt: skip
        call = Span(
            tid, f"{i + 1:08x}{0:08x}", root.span_id, "bench", "chat", KIND_CLIENT,
            start + 100 * MS, end, "inference", 0, None, {},
        )  # fmt: skip
        model = Span(
            tid, f"{2 * i + 2:016x}", call.span_id if caller else root.span_id, "model",
            "generate", KIND_SERVER, start + 100 * MS, end, "inference", 0, None,
            {attrs.PROCESS_CPU_TOTAL_NS: (i + 1) * 20 * MS},
        )  # fmt: skip
        traces.append([root, call, model] if caller else [root, model])
    return traces


def test_a_stage_served_by_processes_of_its_own_has_their_share_of_the_cpu():
    run = load_run(_traceset(_two_process_run()))
    assert dict(run.stage_cpu) == {
        "client": pytest.approx(0.8),
        "inference": pytest.approx(0.2),
    }
    assert run.cpu_ns_per_request == pytest.approx(100 * MS, rel=0.01)


def test_each_service_has_its_share_of_the_cpu_and_its_processes():
    # The loops the load model runs each service's CPU on: one process each here.
    run = load_run(_traceset(_two_process_run()))
    shares = {name: (share, n) for name, share, n in run.processes}
    assert shares == {"bench": (pytest.approx(0.8), 1), "model": (pytest.approx(0.2), 1)}


def test_a_called_stage_costs_its_caller_as_much_again():
    # The client's process has spans in ``client`` and, calling the model, in
    # ``inference``: a call costs the model server's 20% of the CPU and as much again
    # for the client reading its answer.
    run = load_run(_traceset(_two_process_run(caller=True)))
    assert dict(run.stage_cpu) == {"inference": pytest.approx(0.4)}
    assert run.cpu_ns_per_request == pytest.approx(100 * MS, rel=0.01)


def test_one_more_call_costs_the_cpu_of_the_stage_s_own_processes():
    # 100 ms of CPU a request, half in line: inference holds 45 ms of it by length
    # (900 of 1,000 ms), so its waits are 855 ms. Called twice, the model server's 20%
    # of the CPU comes again: in line 45 + 10 ms, where by length it would be 90. The
    # CPU per request then rises with the lower throughput, (1000 / x) ** -0.3: the
    # fixed point is 2 x 855 + 95 + 1.208 x (55 + 5) = 1,877 ms (by length, with
    # 90 + 5 in line: 1,920).
    run = load_run(_traceset(_two_process_run()), cores=8.0, cpu_ms_per_request=100.0)
    assert dict(run.stage_cpu)["inference"] == pytest.approx(0.2)
    assert project_load(run, Repeat("inference", 2)).after.p50 == pytest.approx(1877.4, rel=0.002)
    by_length = replace(run, stage_cpu=())
    assert project_load(by_length, Repeat("inference", 2)).after.p50 == pytest.approx(
        1920.5, rel=0.002
    )


def test_a_copy_of_a_faster_call_costs_what_the_faster_call_does():
    # 100 ms of CPU a request, 90 of it in the model's stretch (by length), of which a
    # call of inference costs the model server's 20 ms. Called twice as it was, the
    # copy brings those 20 ms. A stage k times faster costs k ** -0.13 of its CPU (the
    # model's 90 ms: 49.4 at 100x), its copies alike.
    run = load_run(_traceset(_two_process_run()), cores=8.0, cpu_ms_per_request=100.0)
    assert SPEED_CPU_SCALING == 0.13
    assert _cpu_ms(run, Repeat("inference", 2)) == pytest.approx(120.0)
    assert _cpu_ms(run, Faster("inference", 100)) == pytest.approx(10 + 90 / 100**0.13)
    twice = Combined((Faster("inference", 100), Repeat("inference", 2)))
    assert _cpu_ms(run, twice) == pytest.approx(10 + (90 + 20) / 100**0.13)


def test_the_relays_get_a_best_of_n_answer_in_one_burst():
    # The same run: of the model's 90 ms, 20 are the model server's and 70 the relays'
    # (the gateway, the client), which a single call's stream wakes token
    # by token. Best-of-N sends them the one answer kept once all are in: the relays'
    # 70 ms cost what they do for a stage 100x faster (100 ** -0.13), while each copy
    # brings the model server's 20 ms. Best-of-2 as it is: 10 + 20 + 70 x 0.549 + 20.
    # With the model 10x faster, its stretches' 10 ** -0.13 applies to the rest; the
    # relays' part is at the burst's (the lesser). Calls in sequence keep their relays.
    run = load_run(_traceset(_two_process_run()), cores=8.0, cpu_ms_per_request=100.0)
    assert FANOUT_RELAY_SPEED == 100.0
    assert _cpu_ms(run, Fanout("inference", 2)) == pytest.approx(50 + 70 / 100**0.13)
    best_of_3 = Combined((Faster("inference", 10), Fanout("inference", 3)))
    assert _cpu_ms(run, best_of_3) == pytest.approx(10 + 60 / 10**0.13 + 70 / 100**0.13)
    # At 100x the stage is already as fast as the burst: only the copies are added.
    at_100 = Combined((Faster("inference", 100), Fanout("inference", 2)))
    assert _cpu_ms(run, at_100) == pytest.approx(10 + 110 / 100**0.13)


def _cpu_ms(run: LoadRun, scenario: Scenario) -> float:
    """The CPU a request (ms) the model gives the run's request under ``scenario``."""
    (graph, *_) = _steps(run, scenario, 1.0, templates=expand_templates(run.templates, scenario))
    return sum(step.ns for node in graph.nodes for step in node if step.kind == CPU) / MS


def test_a_faster_stage_s_cpu_falls_with_its_speed_or_the_throughput_not_both():
    # 100 ms of CPU a request, 90 of it in the model's stretch; the model 100x faster
    # (k ** -0.13: 0.549). At x times the throughput the chain's CPU per request is
    # x ** -0.3 of it (x = 4: 0.660, x = 32: 0.354), and the model's stretches get the
    # lesser of the two factors: at 4x 0.549, at 32x 0.354 (the throughput's alone).
    run = load_run(_traceset(_two_process_run()), cores=8.0, cpu_ms_per_request=100.0)
    faster = Faster("inference", 100)

    def cpu_ms(x: float) -> float:
        (graph, *_) = _steps(run, faster, 1.0, (run.templates[0],), x)
        return sum(step.ns for node in graph.nodes for step in node if step.kind == CPU) / MS

    assert CPU_SCALING == 0.3
    assert cpu_ms(1) == pytest.approx(10 + 90 * 100**-0.13)
    assert cpu_ms(4) == pytest.approx(10 * 4**-0.3 + 90 * 100**-0.13)  # 56.0, not 39.2
    assert cpu_ms(32) == pytest.approx(100 * 32**-0.3)  # 35.4: 10 and 90 alike
    # A stage no faster keeps the throughput's factor alone.
    (graph, *_) = _steps(run, Faster("inference", 1), 1.0, (run.templates[0],), 32)
    assert sum(s.ns for node in graph.nodes for s in node if s.kind == CPU) == pytest.approx(
        100 * 32**-0.3 * MS
    )


def test_a_stretch_s_cpu_comes_in_pieces_through_its_wait_each_in_its_loop():
    # 100 ms of CPU a request, half in line, by length: the model's 900 ms stretch has
    # 45 ms of it, paced through its 855 ms of waiting in pieces of 1 ms (a stream's
    # relays handling one token, then waiting for the next), each taken in turn by its
    # process's loop; the client's 100 ms stretch, 5 pieces. The other half runs beside
    # each stretch, from its start, as much by length and paced through the same wait:
    # a node of its own for each stretch, which the request's end waits for.
    run = load_run(_traceset(_two_process_run()), cores=8.0, cpu_ms_per_request=100.0)
    template = run.templates[0]
    (graph, *_) = _steps(run, None, 1.0)
    own, beside = graph.nodes[: len(template.nodes)], graph.nodes[len(template.nodes) :]
    for nodes in (own, beside):
        cpu = [step for node in nodes for step in node if step.kind == CPU]
        assert len(cpu) == 50 and max(step.ns for step in cpu) <= LOOP_PIECE_MS * MS
        assert sum(step.ns for step in cpu) == pytest.approx(50 * MS)
        assert all(step.loop for step in cpu) and {step.pool for step in cpu} <= {"bench", "model"}
        longest = max(nodes, key=len)  # the model's stretch: wait, piece, wait, ...
        assert [step.kind for step in longest] == [DELAY, CPU] * 45
        assert longest[0].ns == pytest.approx(855 * MS / 45)
    # Each node beside starts with its stretch's node (both after the same nodes).
    model = max(range(len(own)), key=lambda i: len(own[i]))
    (twin,) = [j for j, node in enumerate(graph.nodes) if j >= len(own) and len(node) == 90]
    assert graph.after[twin] == graph.after[model]
    assert len(beside) == sum(1 for node in template.nodes for x in node if isinstance(x, Stretch))


def test_parallel_calls_with_the_cores_busy_say_the_projection_came_out_short_there():
    # 100 ms of CPU a request; best-of-3 brings the model server's 20 ms twice more.
    # Eight clients on 1.5 cores keep them busy but not full; one client on eight
    # leaves them idle; three calls in sequence on one core keep it as busy, and say
    # nothing of parallel calls.
    run = load_run(_traceset(_two_process_run()), cores=8.0, cpu_ms_per_request=100.0)

    def said(projection: LoadWhatIf) -> list[str]:
        return [n for n in projection.notes if n.startswith("parallel calls")]

    idle = project_load(run, Fanout("inference", 3))
    assert idle.utilization_after["cpu"] < 0.1
    assert not said(idle)
    busy = project_load(replace(run, clients=8, cores=1.5), Fanout("inference", 3))
    assert PARALLEL_BUSY <= busy.utilization_after["cpu"] < CPU_FULL
    (note,) = said(busy)
    assert note.startswith(
        f"parallel calls with the chain's cores {busy.utilization_after['cpu']:.0%} busy: "
        "on real runs like this one the projection's tail came out short, its median "
        "off either way"
    )
    assert not any("least sure" in n for n in busy.notes)
    # With the cores full, that note says it, not the one on full cores alone.
    full = project_load(replace(run, clients=8, cores=0.75), Fanout("inference", 3))
    assert full.utilization_after["cpu"] >= CPU_FULL
    assert len(said(full)) == 1 and not any("least sure" in n for n in full.notes)
    sequence = project_load(replace(run, clients=8, cores=1.0), Repeat("inference", 3))
    assert PARALLEL_BUSY <= sequence.utilization_after["cpu"] < CPU_FULL
    assert not said(sequence)


def test_a_projection_whose_cores_end_up_full_says_it_is_least_sure_there():
    # 100 ms of CPU a request on one core: sixteen clients keep it full before and
    # after the model gets faster; one client on eight cores leaves them idle.
    run = load_run(_traceset(_two_process_run()), cores=8.0, cpu_ms_per_request=100.0)
    idle = project_load(run, Faster("inference", 10.0))
    assert idle.utilization_after["cpu"] < 0.2
    assert not any("least sure" in note for note in idle.notes)
    full = project_load(replace(run, clients=16, cores=1.0), Faster("inference", 10.0))
    assert full.utilization_after["cpu"] >= 0.9
    (note,) = [note for note in full.notes if "least sure" in note]
    assert note.startswith(
        f"after the change the chain's cores are {full.utilization_after['cpu']:.0%} busy"
    )
