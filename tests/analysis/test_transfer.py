"""A worker's trace table crosses a real pipe from a forked process whole: every column,
name, warning and mark as the worker held them, and the worker's copy let go."""

from __future__ import annotations

import multiprocessing
import random

import numpy as np
import pytest

from tests.analysis.test_table_memory import _breakdown
from tracer.analysis.table._table import Projected, TraceTable
from tracer.analysis.table._transfer import receive_table, send_table
from tracer.spans.model import Warnings

pytestmark = pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="needs fork"
)


def _table(seed: int, n: int) -> TraceTable:
    """Rows of every kind a worker makes: projections, split values, weights, an id of
    another form, warnings, and marks of traces that left no row."""
    rng = random.Random(seed)
    table = TraceTable()
    for i in range(n):
        odd = "ABC123" if i == 3 else None  # not 32 lowercase hex digits: kept as a string
        b = _breakdown(rng, i, odd)
        issues = Warnings()
        if i % 17 == 0:
            issues.skip(f"trace {i}: clock skew", 0)
        table.add(
            b,
            seq=i * 4096,
            last_end=i * 4096 + 900,
            issues=issues,
            split=f"run-{i % 3}" if i % 5 else None,
            projected=Projected(
                after_ns=b.e2e_ns / 3,
                ttft_before_ns=b.ttft_ns if i % 2 else None,
                ttft_after_ns=b.ttft_ns / 2.5 if i % 2 else None,
                has_stage=bool(i % 4),
                before_groups={"inference": i + 1},
                after_groups={"inference": (i + 1) / 7},
            ),
            weight=(4.0, True) if i % 6 == 0 else (1.0, i % 11 != 0),
        )
        if i % 9 == 0:
            table.mark(f"{i:032x}", i * 4096 + 1, i * 4096 + 2, None, selected=False)
    return table


def _send(conn, seed: int, n: int) -> None:
    table = _table(seed, n)
    send_table(conn, table, "ok", ["loaded"])
    conn.send(len(table))  # what the worker holds after sending
    conn.close()


def _receive(seed: int, n: int) -> tuple[tuple, int]:
    """What a forked worker sends of ``_table(seed, n)``, and the rows it held after."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    worker = ctx.Process(target=_send, args=(child, seed, n), daemon=True)
    worker.start()
    child.close()
    try:
        assert parent.poll(60), "the worker sent nothing"
        message = receive_table(parent, parent.recv())
        assert parent.poll(60), "the worker sent its table's arrays short"
        left = parent.recv()
    finally:
        worker.join(timeout=10)
        if worker.is_alive():  # it waits on a pipe nobody reads: the test fails, not hangs
            worker.kill()
    assert worker.exitcode == 0
    return message, left


def _columns(table: TraceTable) -> dict:
    cols = vars(table.columns())
    return {k: v.tolist() if isinstance(v, np.ndarray) else repr(v) for k, v in cols.items()}


@pytest.mark.parametrize("n", [0, 1, 300, 5000])
def test_a_table_sent_from_a_forked_worker_arrives_whole(n):
    (status, loaded, table), left = _receive(7, n)
    assert (status, loaded) == ("ok", ["loaded"])
    assert left == 0  # the worker let its table go as it sent it
    expected = _table(7, n)
    assert len(table) == n
    assert table.repeated() == expected.repeated()
    assert repr(table.tally()) == repr(expected.tally())
    assert repr(table.tally("run-1")) == repr(expected.tally("run-1"))
    assert _columns(table) == _columns(expected)


def test_a_received_table_merges_as_the_table_it_was():
    (_, _, received), _ = _receive(11, 700)
    merged, expected = _table(3, 400), _table(3, 400)
    merged.merge(received)
    expected.merge(_table(11, 700))
    assert len(received) == 0  # merged in and let go
    assert _columns(merged) == _columns(expected)
    assert merged.repeated() == expected.repeated()
