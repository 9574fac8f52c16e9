"""Every per-trace column the schema declares travels the whole way: added one row at a
time and a batch at a time, merged, sent between processes' ends of a pipe, sorted into
the columns, and (a summarised one) reported in the JSON, with the values it was given."""

from __future__ import annotations

import dataclasses
import multiprocessing
import typing

import numpy as np

from tracer.analysis.aggregate import aggregate_table
from tracer.analysis.model.breakdown import TraceBreakdown
from tracer.analysis.render.json_out import analysis_dict
from tracer.analysis.table._columns import Columns, Projected, ProjectedColumns
from tracer.analysis.table._table import TraceTable
from tracer.analysis.table._transfer import receive_table, send_table
from tracer.analysis.table.schema import FILLED, NONE, PROJECTED, ROW, SUMMARIES, Column
from tracer.spans.model import Warnings

ROWS = 12
FLAT = [c for c in ROW if c.layout != "sparse"]


def _value(c: Column, i: int) -> object:
    """Row ``i``'s value of column ``c``: None in every fourth row where the column
    has None, else a value of its type that differs from row to row and from the
    default."""
    if i % 4 == 3 and (c.default is None or (c.default == NONE and not c.strings)):
        return None
    if c.strings:
        return f"{c.name}-{i % 3}"
    if c.code == "B" or c.dtype == "bool":
        return i % 2 == 0
    if c.code == "d":
        return 2.5 + i
    return 1_000 * (i + 1) + len(c.name)  # increasing: the rows keep their order


def _rows() -> list[dict[str, object]]:
    return [{c.name: _value(c, i) for c in FLAT} for i in range(ROWS)]


def _groups(i: int) -> dict[str, int]:
    return {"inference": 50 + i, "retrieval": 7}


def _breakdown(i: int, row: dict[str, object]) -> TraceBreakdown:
    fields = {c.field: row[c.name] for c in FLAT if c.from_breakdown}
    return TraceBreakdown(
        trace_id=f"{i + 1:032x}",
        groups=_groups(i),
        ttft_groups=_groups(i),
        hops={("app", "model"): 3 + i},
        filled={c.name: row[c.name] for c in FILLED},
        **fields,
    )


def _projected(i: int) -> Projected:
    values = {c.name: _value(c, i) for c in PROJECTED if c.layout != "sparse"}
    return Projected(before_groups=_groups(i), after_groups={"inference": (50 + i) / 2}, **values)


def _add(table: TraceTable, rows: list[dict[str, object]], first: int) -> None:
    for i, row in enumerate(rows, first):
        table.add(
            _breakdown(i, row),
            seq=row["seq"],
            last_end=row["last_end"],
            issues=Warnings(),
            split=row["split"],
            projected=_projected(i),
            weight=(row["weight"], not row["weight_unknown"]),
        )


def _add_rows(table: TraceTable, rows: list[dict[str, object]], first: int) -> None:
    at = range(first, first + len(rows))
    groups = np.array([[_groups(i)["inference"], 7] for i in at], np.int64)
    columns: dict[str, object] = {c.name: [row[c.name] for row in rows] for c in FLAT}
    columns["group_entries"] = (["inference", "retrieval"], groups, None)
    columns["ttft_entries"] = (["inference", "retrieval"], groups, np.ones(len(rows), bool))
    columns["hop_entries"] = ([("app", "model")], np.array([[3 + i] for i in at]), None)
    table.add_rows([f"{i + 1:032x}" for i in at], columns, [_projected(i) for i in at])


def _decoded(c: Column, cols: Columns) -> list:
    values = getattr(cols, c.name).tolist()
    if c.strings:
        return [None if v == NONE else cols.strings[v] for v in values]
    return [None if c.default == NONE and v == NONE else v for v in values]


def _sent(table: TraceTable) -> TraceTable:
    """``table`` as the other end of a pipe receives it (:mod:`tracer.analysis.table._transfer`)."""
    here, there = multiprocessing.Pipe()
    send_table(here, table, "part")
    (_, received) = receive_table(there, there.recv())
    assert len(table) == 0  # the sender let it go
    return typing.cast(TraceTable, received)


def test_the_schema_names_the_fields_of_the_columns_the_breakdown_and_the_projection():
    # The columns the type checker is told of are the schema's (each set from it).
    declared = set(typing.get_type_hints(Columns)) - {
        "ids", "strings", "group_names", "hop_names", "projected"
    }  # fmt: skip
    assert declared <= {c.name for c in ROW}
    assert {c.field for c in ROW if c.from_breakdown} | {"filled"} <= {
        f.name for f in dataclasses.fields(TraceBreakdown)
    }
    assert [c.name for c in PROJECTED] == [f.name for f in dataclasses.fields(ProjectedColumns)]
    assert [c.name for c in PROJECTED] == list(Projected._fields)
    assert [c.summary for c in SUMMARIES][:4] == ["e2e", "ttft", "coordinator_ttft", "model_ttft"]


def test_every_column_travels_through_add_merge_transfer_and_columns():
    rows = _rows()
    one, batch = TraceTable(), TraceTable()
    _add(one, rows[:5], 0)
    _add_rows(batch, rows[5:], 5)
    merged = TraceTable()
    merged.merge(_sent(one))
    merged.merge(_sent(batch))
    cols = _sent(merged).columns()
    assert cols.ids.tolist() == [f"{i + 1:032x}" for i in range(ROWS)]
    for c in FLAT:
        assert _decoded(c, cols) == [row[c.name] for row in rows], c.name
    assert cols.span_count.dtype == np.int64 and cols.weight_unknown.dtype == bool
    # and back into breakdowns, each with its row's values
    for b, row in zip(cols.breakdowns(), rows, strict=True):
        for c in FLAT:
            if c.from_breakdown:
                assert getattr(b, c.field) == row[c.name], c.name
        assert b.filled == ({c.name: row[c.name] for c in FILLED} if FILLED else None)
    for c, entries in ((c, getattr(cols, c.name)) for c in ROW if c.layout == "sparse"):
        assert entries.ends.tolist() == [
            (r + 1) * (1 if c.name == "hop_entries" else 2) for r in range(ROWS)
        ], c.name
    assert cols.group_entries.values.tolist() == [v for i in range(ROWS) for v in (50 + i, 7)]
    assert cols.hop_entries.values.tolist() == [3 + i for i in range(ROWS)]
    p = cols.projected
    assert p is not None
    for c in PROJECTED:
        if c.layout != "sparse":
            expected = [_value(c, i) for i in range(ROWS)]
            got = getattr(p, c.name).tolist()
            assert got == [c.default if v is None else v for v in expected], c.name
    assert p.after_groups[2].tolist() == [(50 + i) / 2 for i in range(ROWS)]


def test_each_summarised_column_is_reported_in_the_json_from_its_rows():
    rows = _rows()
    for row in rows:  # full data: each figure is the rows' own
        row["weight"], row["weight_unknown"] = 1.0, False
    table = TraceTable()
    _add(table, rows, 0)
    out = analysis_dict(aggregate_table(table, "stage", Warnings(), Warnings()))
    for c in SUMMARIES:
        values = [row[c.name] for row in rows if row[c.name] is not None]
        figures = out[c.key]
        assert figures["n"] == len(values) == (ROWS if c.name == "e2e_ns" else 9), c.name
        assert figures["min"] == min(values) / c.scale, c.name
        assert figures["max"] == max(values) / c.scale, c.name


def test_a_column_left_out_of_a_batch_is_its_default_in_every_row():
    rows = _rows()
    table = TraceTable()
    _add(table, rows[:1], 0)  # a row that sets every lazy column
    at = np.array([rows[0]["start_ns"] + 1, rows[0]["start_ns"] + 2])
    table.add_rows(
        [f"{i:032x}" for i in (50, 51)],
        {"start_ns": at, "seq": [7, 8], "root_service": "svc", "root_name": "op"},
        [_projected(1), _projected(2)],
    )
    cols = table.columns()
    first = rows[0]
    assert cols.cached_tokens.tolist() == [first["cached_tokens"], NONE, NONE]
    assert cols.coordinator_ttft_ns.tolist() == [first["coordinator_ttft_ns"], NONE, NONE]
    assert cols.weight.tolist() == [first["weight"], 1.0, 1.0]
    assert cols.weight_unknown.tolist() == [first["weight_unknown"], False, False]
    assert cols.ttft_ns.tolist() == [first["ttft_ns"], NONE, NONE]
    assert cols.split is None  # (not every row has a value)
    assert [cols.strings[m] for m in cols.model.tolist()] == [first["model"], None, None]
    assert cols.group_entries.ends.tolist() == [2, 2, 2]  # the batch's rows: no entries
