"""The compact per-trace table sorts its rows (and their sparse group rows) exactly."""

from __future__ import annotations

import dataclasses
import random

import numpy as np

from tracer.analysis.model.breakdown import TraceBreakdown
from tracer.analysis.table._table import TraceTable
from tracer.analysis.table.schema import ROW


def _breakdown(rng: random.Random, i: int) -> TraceBreakdown:
    groups = {g: rng.randrange(1, 100) for g in ("a", "b", "c", "d") if rng.random() < 0.6}
    return TraceBreakdown(
        trace_id=f"{rng.randrange(1 << 64):032x}",
        root_service="svc",
        root_name="op",
        start_ns=rng.randrange(5),  # many ties: sorted by trace id then
        e2e_ns=sum(groups.values()),
        groups=groups,
        hops={("x", "y"): 1} if rng.random() < 0.3 else {},
        ttft_ns=None,
        ttft_groups=None,
        model_ttft_ns=None,
        input_tokens=None,
        output_tokens=None,
        model=None,
        span_count=len(groups),
    )


def test_columns_sort_rows_and_their_group_entries_by_start_then_trace_id():
    for seed in range(20):
        rng = random.Random(seed)
        rows = [_breakdown(rng, i) for i in range(rng.randrange(0, 60))]
        table = TraceTable()
        for b in rows:
            table.add(b)
        dropped = {b.trace_id for b in rows if rng.random() < 0.2}
        table.drop(dropped)
        cols = table.columns()
        kept = sorted(
            (b for b in rows if b.trace_id not in dropped), key=lambda b: (b.start_ns, b.trace_id)
        )
        assert cols.ids.tolist() == [b.trace_id for b in kept]
        assert cols.start_ns.tolist() == [b.start_ns for b in kept]
        at, keys, values = cols.groups
        names = cols.group_names
        got = [dict() for _ in kept]
        order = [[] for _ in kept]
        for r, k, v in zip(at.tolist(), keys.tolist(), values.tolist(), strict=True):
            got[r][names[k]] = v
            order[r].append(names[k])
        assert got == [b.groups for b in kept]
        assert order == [list(b.groups) for b in kept]  # each row's entries in their order
        assert (np.diff(at) >= 0).all()
        hop_rows = cols.hops[0].tolist()
        assert hop_rows == [r for r, b in enumerate(kept) if b.hops]


def test_columns_that_take_the_rows_over_equal_the_columns_of_a_copy(monkeypatch):
    # Small pieces and chunks, so that the source columns are cut into many pieces and
    # let go while rows come out of order (starts shuffled locally, some dropped).
    from tracer.analysis.table import _reorder

    monkeypatch.setattr(_reorder, "_PIECE", 7)
    monkeypatch.setattr(_reorder, "_CHUNK", 5)
    for seed in range(10):
        rng = random.Random(seed)
        rows = [_breakdown(rng, i) for i in range(rng.randrange(0, 200))]
        for i, b in enumerate(rows):
            b.start_ns = i + rng.randrange(-20, 20)
        tables = [TraceTable(), TraceTable()]
        for table in tables:
            for b in rows:
                table.add(b)
            table.drop({b.trace_id for b in rows[::7]})
        kept, taken = tables[0].columns(), tables[1].columns(release=True)
        assert taken.ids.tolist() == kept.ids.tolist()
        for a, b in ((kept.groups, taken.groups), (kept.hops, taken.hops)):
            assert all(x.tolist() == y.tolist() for x, y in zip(a, b, strict=True))
        assert taken.e2e_ns.tolist() == kept.e2e_ns.tolist()
        assert len(tables[1]) == len(rows)  # it still counts its rows


def _rows(seed: int, n: int, kind: str) -> list[tuple[TraceBreakdown, dict]]:
    """Rows for :meth:`TraceTable.add`: ``plain``, every optional column at its usual
    value (no cached tokens, coordinator, split value or weight); ``same``, every row
    with the same values there, not the usual ones; ``mixed``, values that vary."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        b = _breakdown(rng, i)
        extra: dict = {}
        if kind == "same":
            b = dataclasses.replace(b, cached_tokens=64, coordinator_ttft_ns=5_000)
            extra = {"weight": (4.0, False)}
        elif kind == "mixed":
            b = dataclasses.replace(
                b,
                cached_tokens=rng.choice([None, 0, 64]),
                coordinator_ttft_ns=rng.choice([None, 5_000]),
            )
            extra = {
                "split": rng.choice([None, "blue", "green"]),
                "weight": rng.choice([(1.0, True), (4.0, True), (1.0, False)]),
            }
        out.append((b, {"seq": seed * 10_000 + i, **extra}))
    return out


def _cols(table: TraceTable) -> dict:
    cols = vars(table.columns())
    return {k: v.tolist() if isinstance(v, np.ndarray) else repr(v) for k, v in cols.items()}


def test_columns_left_at_one_value_merge_with_columns_that_are_not():
    # Parts of every kind merged in every order give the columns of one table that
    # took all the rows; a part whose rows all have one value (the usual one or not)
    # stores none of the lazy columns but the split value's.
    parts = [
        (1, 0, "plain"),
        (2, 40, "plain"),
        (3, 30, "mixed"),
        (4, 25, "plain"),
        (5, 50, "mixed"),
        (6, 20, "same"),
        (7, 10, "same"),
    ]
    lazy = [c for c in ROW if c.layout == "lazy" and c.name != "split"]
    assert {"coordinator_ttft_ns", "cached_tokens", "weight", "weight_unknown"} <= {
        c.name for c in lazy
    }
    for order in (
        [0, 1, 2, 3, 4, 5, 6],
        [2, 1, 5, 3, 4, 0, 6],
        [5, 6, 1, 3, 2, 4, 0],
        [6, 4, 2, 1, 3, 0, 5],
        [0, 5, 6, 1, 3, 2, 4],
    ):
        one, merged = TraceTable(), TraceTable()
        for seed, n, kind in (parts[k] for k in order):
            part = TraceTable()
            for b, kw in _rows(seed, n, kind):
                one.add(b, **kw)
                part.add(b, **kw)
            if kind != "mixed":
                assert not any(len(getattr(part, c.attr)) for c in lazy)
            merged.merge(part)
        assert len(merged) == len(one) == 175
        assert _cols(merged) == _cols(one)
        assert repr(merged.tally("blue")) == repr(one.tally("blue"))
    plain = TraceTable()
    for b, kw in _rows(6, 30, "plain"):
        plain.add(b, **kw)
    cols = plain.columns()
    assert cols.split is None and cols.weight is None and cols.weight_unknown is None
    assert (cols.cached_tokens == -1).all() and (cols.coordinator_ttft_ns == -1).all()
    assert cols.span_count.dtype == np.int64  # kept in four bytes, read as eight
    assert sorted(cols.span_count.tolist()) == sorted(
        b.span_count for b, _ in _rows(6, 30, "plain")
    )
    same = TraceTable()
    for b, kw in _rows(8, 30, "same"):
        same.add(b, **kw)
    cols = same.columns()  # nothing stored, every row's value read back
    assert cols.weight.tolist() == [4.0] * 30 and cols.weight_unknown.tolist() == [True] * 30
    assert cols.weight_unknown.dtype == bool
    assert cols.cached_tokens.tolist() == [64] * 30
    assert cols.coordinator_ttft_ns.tolist() == [5_000] * 30


def test_rows_added_a_batch_at_a_time_keep_one_value_as_rows_added_one_by_one():
    # A batch whose rows share a value first, then rows that differ: the lazy column
    # stays empty while the value holds and is filled with it when a row differs.
    rng = random.Random(11)
    rows = [_breakdown(rng, i) for i in range(9)]
    weights = [4.0] * 6 + [2.0, 4.0, 1.0]
    one, batched = TraceTable(), TraceTable()
    for b, w in zip(rows, weights, strict=True):
        one.add(b, weight=(w, True))
    columns = {"e2e_ns": [b.e2e_ns for b in rows[:6]], "weight": weights[:6]}
    batched.add_rows([b.trace_id for b in rows[:6]], columns)
    assert not len(batched._weight)  # one value: nothing stored yet
    for b, w in zip(rows[6:], weights[6:], strict=True):
        batched.add(b, weight=(w, True))
    expected = {b.trace_id: w for b, w in zip(rows, weights, strict=True)}
    for table in (one, batched):
        cols = table.columns()
        assert dict(zip(cols.ids.tolist(), cols.weight.tolist(), strict=True)) == expected
