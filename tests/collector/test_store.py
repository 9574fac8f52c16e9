"""The store's write path: duplicates skipped, failures retried whole, memory bounded."""

from __future__ import annotations

import sqlite3

import pytest

from collector import SpanStore
from collector.store import span_row
from tracer.spans.model import Span


def _span(i: int, attributes: dict | None = None) -> Span:
    return Span(
        f"{i // 4 + 1:032x}", f"{i + 1:016x}", None, "svc", "op", 1, 10, 20, None, 0, None,
        attributes or {"n": i},
    )  # fmt: skip


def test_a_span_sent_twice_in_one_batch_or_again_later_is_stored_once(tmp_path):
    with SpanStore(tmp_path / "s.db", create=True) as store:
        assert store.write([_span(1), _span(2), _span(1)]) == 2
        assert store.write([_span(2), _span(3)]) == 1
        assert store.count() == 3


def test_only_the_most_recent_keys_are_checked_for_duplicates(tmp_path):
    with SpanStore(tmp_path / "s.db", create=True, recent_keys=4) as store:
        store.write([_span(i) for i in range(10)])
        assert store.write([_span(9)]) == 0  # among the last two to four: skipped
        assert store.write([_span(0)]) == 1  # long forgotten: written again
        assert store.count() == 11


def test_a_failed_write_is_stored_in_full_when_sent_again(tmp_path):
    rows = [span_row(_span(i)) for i in range(3)]
    with SpanStore(tmp_path / "s.db", create=True) as store:
        with pytest.raises(sqlite3.ProgrammingError):
            store.write_rows([*rows, ("too", "short")])
        assert store.count() == 0
        assert store.write_rows(rows) == 3
        assert store.count() == 3


def test_spans_read_back_as_written(tmp_path):
    spans = [_span(i, {"s": "x", "i": -(2**63), "l": [1, [2, {"k": None}]]}) for i in range(3)]
    with SpanStore(tmp_path / "s.db", create=True) as store:
        store.write(spans)
        assert sorted(store.iter_spans(), key=lambda s: s.span_id) == spans


def test_attributes_json_cannot_carry_are_refused_before_anything_is_written(tmp_path):
    with SpanStore(tmp_path / "s.db", create=True) as store:
        with pytest.raises(TypeError):
            store.write([_span(1), _span(2, {"n": 2**64})])
        assert store.count() == 0


def test_recent_keys_below_two_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="recent_keys must be at least 2"):
        SpanStore(tmp_path / "s.db", create=True, recent_keys=1)


def test_trace_id_ranges_cut_at_sampled_ids_read_every_span_once_in_trace_order(tmp_path):
    spans = [_span(i) for i in range(400)]  # 100 traces of 4 spans
    spans.reverse()  # written out of trace-id order
    with SpanStore(tmp_path / "s.db", create=True) as store:
        store.write(spans)
        sample = store.trace_id_sample(20)
        assert sample == sorted(sample) and 18 <= len(sample) <= 21
        cuts = [sample[5], sample[10], sample[15]]
        edges = [None, *cuts, None]
        parts = [
            [s.trace_id for _, s in store.iter_trace_rows(trace_ids=(lo, hi), chunk=7)]
            for lo, hi in zip(edges, edges[1:], strict=False)
        ]
        whole = [s.trace_id for _, s in store.iter_trace_rows()]
    assert [t for part in parts for t in part] == whole == sorted(whole)
    assert len(whole) == 400 and all(parts)
    assert all(part[0] == cut for part, cut in zip(parts[1:], cuts, strict=True))
    assert all(t < cut for part, cut in zip(parts, cuts, strict=False) for t in part)


def test_an_empty_store_has_no_sample(tmp_path):
    with SpanStore(tmp_path / "s.db", create=True) as store:
        assert store.trace_id_sample(10) == []
