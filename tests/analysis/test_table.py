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


def _rows(seed: int, n: int, plain: bool) -> list[tuple[TraceBreakdown, dict]]:
    """Rows for :meth:`TraceTable.add`; with ``plain``, every optional column at its
    default (no cached tokens, coordinator, split value or weight)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        b = _breakdown(rng, i)
        extra: dict = {}
        if not plain:
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


def test_columns_left_at_their_default_merge_with_columns_that_are_not():
    # Parts of every kind merged in every order give the columns of one table that
    # took all the rows; a part whose rows all have the defaults stores none of them.
    parts = [(1, 0, True), (2, 40, True), (3, 30, False), (4, 25, True), (5, 50, False)]
    for order in ([0, 1, 2, 3, 4], [2, 1, 3, 4, 0], [1, 3, 2, 4, 0], [4, 2, 1, 3, 0]):
        one, merged = TraceTable(), TraceTable()
        for seed, n, plain in (parts[k] for k in order):
            part = TraceTable()
            for b, kw in _rows(seed, n, plain):
                one.add(b, **kw)
                part.add(b, **kw)
            if plain:
                lazy = [c for c in ROW if c.layout == "lazy"]
                assert [c.name for c in lazy] == [
                    "coordinator_ttft_ns",
                    "cached_tokens",
                    "split",
                    "weight",
                    "weight_unknown",
                ]
                assert not any(len(getattr(part, c.attr)) for c in lazy)
            merged.merge(part)
        assert len(merged) == len(one) == 145
        assert _cols(merged) == _cols(one)
        assert repr(merged.tally("blue")) == repr(one.tally("blue"))
    plain = TraceTable()
    for b, kw in _rows(6, 30, True):
        plain.add(b, **kw)
    cols = plain.columns()
    assert cols.split is None and cols.weight is None and cols.weight_unknown is None
    assert (cols.cached_tokens == -1).all() and (cols.coordinator_ttft_ns == -1).all()
    assert cols.span_count.dtype == np.int64  # kept in four bytes, read as eight
    assert sorted(cols.span_count.tolist()) == sorted(b.span_count for b, _ in _rows(6, 30, True))
