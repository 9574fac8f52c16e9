"""Traces attributed a batch at a time (one shape, numpy arrays) give the rows the
scalar path gives each trace on its own, on random trees, times and marks."""

from __future__ import annotations

import random

import numpy as np
import pytest

from tracer.analysis import render
from tracer.analysis.aggregate import aggregate_table
from tracer.analysis.attribution import shapes
from tracer.analysis.attribution.attribute import Attributor
from tracer.analysis.attribution.batches import ShapeBatcher
from tracer.analysis.conventions.stage_map import parse_stage_map
from tracer.analysis.whatif.retime import Projection
from tracer.spans.model import (
    KIND_CLIENT,
    KIND_CONSUMER,
    KIND_INTERNAL,
    KIND_PRODUCER,
    KIND_SERVER,
    Span,
    Warnings,
)

T0 = 1_750_000_000_000_000_000
MS = 1_000_000

#: Span templates: (service, name, kind, parent index, attributes, stage).
_SHAPES = [
    # a chain of calls with network hops, streamed (marks), tokens at the model
    [
        ("client", "chat", KIND_INTERNAL, -1, {}, "client"),
        ("client", "POST", KIND_CLIENT, 0, {}, None),
        ("gateway", "POST /v1", KIND_SERVER, 1, {}, "gateway"),
        ("gateway", "verify", KIND_INTERNAL, 2, {}, "auth"),
        ("gateway", "POST", KIND_CLIENT, 2, {}, None),
        ("app", "POST /gen", KIND_SERVER, 4, {}, "return"),
        ("app", "context", KIND_INTERNAL, 5, {}, "context"),
        ("app", "chat m", KIND_INTERNAL, 5, {"gen_ai.operation.name": "chat"}, None),
        ("app", "post", KIND_INTERNAL, 5, {}, "postprocess"),
        ("app", "POST", KIND_CLIENT, 7, {}, None),
        (
            "model",
            "POST /v1/chat",
            KIND_SERVER,
            9,
            {
                "gen_ai.usage.input_tokens": 12,
                "gen_ai.usage.output_tokens": 7,
                "gen_ai.usage.cache_read.input_tokens": 5,
                "gen_ai.request.model": "m-1",
            },
            "inference",
        ),
    ],  # fmt: skip
    # a fan-out: parallel and overlapping children, grandchildren
    [
        ("svc", "root", KIND_SERVER, -1, {}, None),
        ("svc", "a", KIND_INTERNAL, 0, {}, "context"),
        ("svc", "b", KIND_INTERNAL, 0, {}, "inference"),
        ("svc", "c", KIND_INTERNAL, 0, {}, "postprocess"),
        ("svc", "d", KIND_INTERNAL, 2, {}, None),
        ("svc", "e", KIND_INTERNAL, 2, {"openinference.span.kind": "LLM"}, None),
        ("svc", "f", KIND_INTERNAL, 0, {}, "auth"),
    ],
    # children listed before their parents; messaging across services
    [
        ("worker", "consume", KIND_CONSUMER, 2, {}, None),
        ("api", "handle", KIND_INTERNAL, 2, {}, "context"),
        ("api", "GET /", KIND_SERVER, -1, {}, "gateway"),
        ("api", "publish", KIND_PRODUCER, 2, {}, None),
        ("worker", "work", KIND_INTERNAL, 0, {}, "inference"),
    ],
    # one span
    [("solo", "GET /health", KIND_SERVER, -1, {}, None)],
    # an engine request span: its sub-stages come from its attributes, per trace
    [
        ("app", "POST", KIND_SERVER, -1, {}, "gateway"),
        (
            "vllm",
            "llm_request",
            KIND_SERVER,
            0,
            {
                "gen_ai.latency.time_in_queue": 0.01,
                "gen_ai.latency.time_in_model_prefill": 0.02,
                "gen_ai.latency.time_in_model_decode": 0.05,
            },
            None,
        ),
    ],  # fmt: skip
]


def _trace(number: int, template: list, rng: random.Random, odd: bool = True) -> list[Span]:
    """A trace of ``template`` with random times: children mostly inside their parents,
    and (``odd``) now and then past their ends (streaming callees; clock skew) or
    before them."""
    tid = f"{number + 1:032x}"
    n = len(template)
    start, end = [0] * n, [0] * n
    done = [False] * n
    while not all(done):
        for i, (_, _, _, p, _, _) in enumerate(template):
            if done[i] or (p >= 0 and not done[p]):
                continue
            if p < 0:
                start[i] = T0 + number * 5_000 * MS
                end[i] = start[i] + rng.randint(50, 3_000) * MS
            else:
                room = end[p] - start[p]
                s = start[p] + rng.randint(0, room)
                e = s + rng.randint(0, room) if odd else rng.randint(s, end[p])
                pick = rng.random() if odd else 1.0
                if pick < 0.08:
                    e = end[p] + rng.randint(1, 200) * MS  # streams on past its parent
                elif pick < 0.12:
                    s, e = start[p] - 30 * MS, start[p] - 5 * MS  # skewed clock
                elif pick < 0.16:
                    e = s  # zero length
                start[i], end[i] = s, e
            done[i] = True
    spans = []
    for i, (service, name, kind, p, attributes, stage) in enumerate(template):
        mark = None
        if rng.random() < 0.5:
            mark = start[i] + rng.randint(0, max(1, end[i] - start[i]))
        spans.append(
            Span(
                tid,
                f"{i + 1:016x}",
                None if p < 0 else f"{p + 1:016x}",
                service,
                name,
                kind,
                start[i],
                end[i],
                stage,
                0,
                mark,
                dict(attributes),
            )
        )
    return spans


def _both(traces: list[list[Span]], **kwargs):
    """(batched, scalar) tables of the same traces, and how many traces the batches
    took (so that a test sees the batches were compared, not the scalar path twice)."""
    out, took = [], []
    for batched in (True, False):
        attribute = Attributor(batched=batched, **kwargs)
        if attribute._batcher is not None:
            offer = attribute._batcher.offer
            attribute._batcher.offer = lambda *a, offer=offer: took.append(offer(*a)) or took[-1]
        for seq, spans in enumerate(traces):
            attribute(spans[0].trace_id, spans, seq, 0)
        out.append(attribute.table)
    return out[0], out[1], sum(took)


def _rows(table) -> dict:
    cols = table.columns()
    return {b.trace_id: b for b in cols.breakdowns()}


@pytest.mark.parametrize("group_by", ["stage", "service", "operation"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_batched_rows_equal_the_scalar_rows(group_by, seed):
    rng = random.Random(seed)
    traces = [_trace(i, _SHAPES[rng.randrange(len(_SHAPES))], rng) for i in range(1500)]
    smap = parse_stage_map(
        {"rule": [{"operation": "d", "attributes": {"flag": "on"}, "stage": "inference.decode"}]},
        "test",
    )
    for spans in traces[::7]:
        for s in spans:
            if s.name == "d":
                s.attributes["flag"] = "on"  # a value a rule compares: another shape
    batched, scalar, taken = _both(traces, group_by=group_by, stage_map=smap, split_by="flag")
    assert _rows(batched) == _rows(scalar)
    a = aggregate_table(batched, group_by, Warnings(), batched.tally())
    b = aggregate_table(scalar, group_by, Warnings(), scalar.tally())
    assert render.dumps(render.analysis_dict(a)) == render.dumps(render.analysis_dict(b))
    # The batches took most traces, the scalar path the skewed ones and the scalar shapes.
    assert len(batched) == len(scalar) == 1500 and taken > 1000
    assert a.warnings.skew_adjusted == b.warnings.skew_adjusted > 0


def _sequential(number: int, rng: random.Random) -> list[Span]:
    """A fan-out of sequential calls whose neighbours touch, overlap by less than the
    clock tolerance (1% of the parent) or by more, start together, or sit under a
    producer as consumers (which do not hold it up)."""
    tid = f"{number + 1:032x}"
    base = T0 + number * 5_000 * MS
    room = rng.randint(200, 3_000) * 1_000  # 0.2-3 ms: a tolerance of 2-30 us
    tolerance = max(room // 100, 1_000)
    spans = [Span(tid, f"{1:016x}", None, "svc", "root", KIND_PRODUCER, base, base + room)]
    at = base + rng.randint(0, room // 10)
    for i in range(2, 8):
        length = rng.randint(0, room // 6)
        kind = KIND_CONSUMER if rng.random() < 0.15 else KIND_INTERNAL
        spans.append(Span(tid, f"{i:016x}", f"{1:016x}", "svc", f"c{i % 3}", kind, at, at + length))
        step = rng.choice([0, 0, -1, 1, -2, 2, -3]) * tolerance // 2
        at = max(base, at + length + step) if rng.random() < 0.8 else at
    return spans


@pytest.mark.parametrize("seed", [1, 2])
def test_batched_walks_follow_the_dependency_model_on_near_touching_siblings(seed):
    rng = random.Random(seed)
    traces = [_sequential(i, rng) for i in range(2000)]
    batched, scalar, taken = _both(traces, group_by="operation", stage_map=None)
    assert _rows(batched) == _rows(scalar)
    assert taken > 1500


@pytest.mark.parametrize("seed", [4, 5])
def test_batches_agree_with_the_scalar_path_whatever_else_a_span_carries(seed):
    # What the shape key does not hold (status, attribute values, marks, times) varies
    # from trace to trace: a decision that read it without the key holding it would
    # make the batches and the scalar path disagree here.
    rng = random.Random(seed)
    traces = [_trace(i, _SHAPES[0], rng, odd=False) for i in range(1200)]
    for spans in traces:
        for s in spans:
            s.status = rng.choice([0, 0, 1, 2])
            for key in list(s.attributes):
                if isinstance(s.attributes[key], int):
                    s.attributes[key] = rng.randint(0, 5000)
                elif isinstance(s.attributes[key], str):
                    s.attributes[key] = rng.choice(["m-1", "m-2", "chat"])
    for group_by in ("stage", "service"):
        batched, scalar, taken = _both(traces, group_by=group_by, stage_map=None)
        assert _rows(batched) == _rows(scalar)
        assert taken > 1000


def test_the_batcher_takes_known_shapes_and_gives_back_the_rest():
    rng = random.Random(5)
    chain, engine = _SHAPES[0], _SHAPES[4]
    given_back: list[str] = []
    attribute = Attributor(group_by="stage", stage_map=None)
    batcher = ShapeBatcher(
        "stage", None, lambda: attribute.rows, lambda t, *a: given_back.append(t)
    )
    first = _trace(0, chain, rng, odd=False)
    assert not batcher.offer(first[0].trace_id, first, 0, 0, None)  # learned, not taken
    taken = sum(batcher.offer(t[0].trace_id, t, 1, 0, None) for t in
                (_trace(i, chain, rng, odd=False) for i in range(1, 40)))  # fmt: skip
    assert taken == 39
    eng = [_trace(i, engine, rng, odd=False) for i in range(40, 43)]
    for t in eng:  # the same phases in each (without a first token, there are none)
        t[1].attributes["gen_ai.latency.time_to_first_token"] = 0.03
    # an engine request span's phases are worked out per trace: its shape is batched
    assert [batcher.offer(t[0].trace_id, t, 2, 0, None) for t in eng] == [False, True, True]
    dup = _trace(50, chain, rng, odd=False)
    dup[3].span_id = dup[4].span_id  # a duplicate id: the scalar path's business
    assert not batcher.offer(dup[0].trace_id, dup, 3, 0, None)
    batcher.flush()
    assert len(attribute.rows) == 41 and not given_back
    skewed = _trace(60, chain, rng, odd=False)
    skewed[10].start_ns -= 10_000 * MS  # the model's clock runs behind: shifted, scalar
    assert batcher.offer(skewed[0].trace_id, skewed, 4, 0, None)
    batcher.flush()
    assert given_back == [skewed[0].trace_id]


@pytest.mark.parametrize(
    "odd",
    [
        {"mark": -1},  # would read as "no mark" in the arrays
        {"mark": -5},
        {"end": 2**63 - 10},  # near int64: sums in the arrays overflow
        {"mark": 2**63 + 5},  # past int64
        {"mark": -(2**63)},  # int64's least: np.abs leaves it negative
    ],
)
def test_marks_and_times_the_arrays_cannot_hold_take_the_scalar_path(odd):
    rng = random.Random(7)
    chain = _SHAPES[0]
    traces = [_trace(i, chain, rng, odd=False) for i in range(20)]
    for spans in traces[5::3]:
        root = spans[0]
        if "mark" in odd:
            root.first_token_ns = odd["mark"]
            spans[1].first_token_ns = root.start_ns + MS  # on the root's service
        else:
            root.end_ns = odd["end"]
        spans[-1].first_token_ns = odd.get("mark", spans[-1].first_token_ns)
    batched, scalar, taken = _both(traces, group_by="stage", stage_map=None)
    assert _rows(batched) == _rows(scalar)
    # Every trace but the first (the shape is learned from it) is queued, but for the
    # five with a mark past int64: the arrays cannot hold it, so they are not queued.
    assert taken == (14 if odd.get("mark", 0) > 2**63 else 19)


@pytest.mark.parametrize("seed", [4, 5])
@pytest.mark.parametrize(("stage", "speedup"), [("inference", 8.0), ("context", 0.5)])
def test_batched_what_if_projections_equal_the_scalar_ones(seed, stage, speedup):
    # whatif and report --speedup project each trace at attribution: the batches hand
    # the scalar retiming the trace the scalar path would prepare.
    rng = random.Random(seed)
    traces = [_trace(i, _SHAPES[rng.randrange(len(_SHAPES))], rng) for i in range(900)]
    projection = Projection(stage, speedup)
    batched, scalar, taken = _both(traces, group_by="stage", stage_map=None, projection=projection)
    a, b = batched.columns(), scalar.columns()
    assert list(a.ids) == list(b.ids) and len(a) == 900
    pa, pb = a.projected, b.projected
    assert pa is not None and pb is not None
    for name in ("after_ns", "ttft_before_ns", "ttft_after_ns", "has_stage"):
        assert np.array_equal(getattr(pa, name), getattr(pb, name)), name
    for name in ("before_groups", "after_groups"):
        for x, y in zip(getattr(pa, name), getattr(pb, name), strict=True):
            assert np.array_equal(x, y), name
    ra = projection.result(a, Warnings(), batched.tally())
    rb = projection.result(b, Warnings(), scalar.tally())
    assert render.dumps(render.whatif_dict(ra)) == render.dumps(render.whatif_dict(rb))
    # Most traces went through the batches (the rest: skewed clocks, scalar shapes).
    assert taken > 500


def test_a_skewed_trace_tried_twice_counts_once_toward_giving_up_on_its_shape():
    """The stream may try to learn a shape from the same trace twice (at its second
    look and when it is complete): the shape is left to the scalar path after
    LEARN_TRIES different skewed traces, not after one trace tried that often."""
    from tracer.analysis.attribution.batches import LEARN_TRIES
    from tracer.analysis.attribution.shapes import SCALAR as _SCALAR

    rng = random.Random(3)
    chain = _SHAPES[0]
    batcher = ShapeBatcher("stage", None, lambda: None, lambda *a: None)

    def skewed(i):
        spans = _trace(i, chain, rng, odd=False)
        spans[10].start_ns -= 10_000 * MS  # the model's clock runs behind
        return spans

    one = skewed(0)
    for _ in range(LEARN_TRIES + 2):
        assert batcher.ticket(one[0].trace_id, one, learn=True) is False
    assert _SCALAR not in batcher._shapes.values()  # still to be learned
    for i in range(1, LEARN_TRIES):
        spans = skewed(i)
        batcher.ticket(spans[0].trace_id, spans, learn=True)
    assert list(batcher._shapes.values()) == [_SCALAR]  # eight different traces: given up


class _Rows:
    """A table that keeps the columns each batch hands it."""

    def __init__(self) -> None:
        self.batches: list[tuple[list[str], dict]] = []

    def add_rows(self, ids, columns, projected=None) -> None:
        self.batches.append((list(ids), dict(columns)))


def _learned(monkeypatch, fill):
    """What a shape learns of the chain's first trace when the schema has a column
    ``fill`` gives (the column itself does not matter here: only its function)."""
    monkeypatch.setattr(shapes, "FILLED", (fill,))
    monkeypatch.setattr(shapes, "filled", lambda trace: {"value": fill(trace)})
    spans = _trace(0, _SHAPES[0], random.Random(9), odd=False)
    return shapes.learn(spans[0].trace_id, spans, "stage", None)


def test_a_function_of_the_trace_is_answered_once_a_shape_keyed_on_the_values_it_read(
    monkeypatch,
):
    def operation(trace):  # an attribute's value, and a token count the batch reads anyway
        a = trace.spans[7].attributes
        return (a.get("gen_ai.operation.name"), trace.spans[10].attributes["gen_ai.request.model"])

    shape, slots, _ = _learned(monkeypatch, operation)
    assert shape.filled == {"value": ("chat", "m-1")}
    assert (10, "attributes", "gen_ai.request.model") in slots  # though the batch reads it
    assert (7, "attributes", "gen_ai.operation.name") in slots
    # The stages, tree and names are the shape's: reading them adds nothing to the key.
    shape, slots, _ = _learned(
        monkeypatch, lambda t: sum(s == "inference" for s in t.stage) + len(t.spans[3].name)
    )
    assert shape.filled == {"value": 1 + len("verify")}
    assert not slots
    # Times, ids and the trace state differ from trace to trace: the scalar path's.
    for reads in (
        lambda t: t.end[t.root] - t.start[t.root],
        lambda t: [s for s in t.start],
        lambda t: t.spans[2].end_ns,
        lambda t: t.spans[-1].first_token_ns,
        lambda t: t.spans[4].span_id,
        lambda t: t.spans[0].trace_state,
    ):
        assert _learned(monkeypatch, reads) is shapes.SCALAR

    # In the batches, traces whose read value differs are shapes apart, each with its own.
    monkeypatch.setattr(shapes, "filled", lambda t: {"op": operation(t)[0]})
    rows = _Rows()
    batcher = ShapeBatcher("stage", None, lambda: rows, lambda *a: None)
    rng = random.Random(3)
    for i in range(12):
        spans = _trace(i, _SHAPES[0], rng, odd=False)
        spans[7].attributes["gen_ai.operation.name"] = "chat" if i % 2 else "embeddings"
        batcher.offer(spans[0].trace_id, spans, i, 0, None)
    batcher.flush()
    answers = {trace_id: columns["op"] for ids, columns in rows.batches for trace_id in ids}
    assert answers == {
        f"{i + 1:032x}": "chat" if i % 2 else "embeddings" for i in range(2, 12)
    }  # (the first trace of each shape is the scalar path's)
