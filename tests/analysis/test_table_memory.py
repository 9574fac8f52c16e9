"""A trace table and its aggregation hold a bounded number of bytes per trace, and
trace ids read back exactly whatever their form."""

from __future__ import annotations

import random
import tracemalloc

from tracer.analysis.aggregate import aggregate_table
from tracer.analysis.model.breakdown import TraceBreakdown
from tracer.analysis.table._table import TraceTable
from tracer.spans.model import Warnings

STAGES = ("client", "network", "gateway", "auth", "context", "inference", "post", "return")
HOPS = (("client", "gateway"), ("gateway", "app"), ("app", "model"))


def _breakdown(rng: random.Random, i: int, trace_id: str | None = None) -> TraceBreakdown:
    # The seven-stage chain's shape: 9 group entries, 6 before the first token, 3 hops.
    groups = {g: rng.randrange(1_000, 2_000_000_000) for g in STAGES}
    groups["inference.decode"] = rng.randrange(1, 10**9)
    ttft = dict(list(groups.items())[:6])
    return TraceBreakdown(
        trace_id=trace_id or f"{rng.randrange(1 << 128):032x}",
        root_service="client",
        root_name="chat",
        start_ns=1_750_000_000_000_000_000 + i * 7_000_000 + rng.randrange(-(10**9), 10**9),
        e2e_ns=sum(groups.values()),
        groups=groups,
        hops={h: rng.randrange(1, 10**8) for h in HOPS},
        ttft_ns=sum(ttft.values()),
        ttft_groups=ttft,
        model_ttft_ns=rng.randrange(1, 10**9),
        input_tokens=600,
        output_tokens=120,
        model="sim-1",
        span_count=11,
    )


def _table(n: int) -> TraceTable:
    rng = random.Random(3)
    table = TraceTable()
    for i in range(n):
        table.add(_breakdown(rng, i), seq=i, last_end=i)
    return table


def test_table_and_aggregation_hold_a_bounded_number_of_bytes_per_trace():
    # Per row the table holds 16 bytes of trace id, 80 of fixed columns (the cached
    # tokens, P/D coordinator, split value and weight columns stay empty while every
    # row has the default), and for each of its three sparse columns a two-byte key set
    # and an eight-byte value an entry: 246 bytes for this shape (18 entries). 280
    # leaves room for the arrays' growth (257 measured); with those columns always kept
    # and a row end and a name index an entry, it was 339 and more.
    n = 20_000
    _table(100)  # interned names and the like, made once, outside the measurement
    tracemalloc.start()
    try:
        table = _table(n)
        held, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        analysis = aggregate_table(table, "stage", Warnings(), table.tally())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert analysis.traces == n
    assert held / n < 280
    # The aggregation takes the table's rows over as it sorts them, so at its peak it
    # needs about one more table on top (325 measured: a sparse column held twice while
    # it is sorted, as rows this few fit in one piece, each entry's name written out,
    # and the aggregation's per-trace arrays); keeping the table while copying its rows
    # took 591.
    assert (peak - held) / n < 400


def test_trace_ids_of_any_form_read_back_and_repeat_across_parts():
    rng = random.Random(5)
    odd = ["ABCDEF0123456789ABCDEF0123456789", "a1b2c3d4e5f60718", "not hex at all"]
    canonical = [f"{rng.randrange(1 << 128):032x}" for _ in range(5)] + ["0" * 32]
    for ids in (canonical, canonical + odd):
        table = TraceTable()
        for i, t in enumerate([*ids, ids[0], ids[-1]]):  # two traces in two parts
            table.add(_breakdown(rng, i, t), seq=i, last_end=i)
        assert sorted(table.repeated()) == sorted({ids[0], ids[-1]})
        table.drop({ids[0]})
        assert list(table.repeated()) == [ids[-1]]
        cols = table.columns()
        assert sorted(cols.ids.tolist()) == sorted([*ids[1:], ids[-1]])
        assert (cols.ids == ids[-1]).sum() == 2 and not (cols.ids == ids[0]).any()
        first = cols.ids[0]
        assert isinstance(first, str) and cols.ids[cols.ids == first].tolist() == [first]
