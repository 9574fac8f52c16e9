"""Sparse rows read back exactly as they were added, in either storage form: as key
sets, as the explicit form a column turns to past too many distinct sets, and merged
across the two."""

from __future__ import annotations

import random

import numpy as np
import pytest

from tracer.analysis.table import _sparse
from tracer.analysis.table._reorder import sorted_entries
from tracer.analysis.table._sparse import _Names, _Sparse

NAMES = [f"g{i}" for i in range(9)]


def _rows(rng: random.Random, n: int, float_values: bool = False) -> list[dict]:
    out = []
    for _ in range(n):
        names = [g for g in NAMES if rng.random() < 0.5]
        rng.shuffle(names)  # a dict keeps its order: so must the row
        out.append(
            {g: (rng.random() * 9 if float_values else rng.randrange(1, 10**12)) for g in names}
        )
    return out


def _fill(column: _Sparse, rows: list[dict], rng: random.Random) -> None:
    """Add ``rows`` one by one and in batches (as the shape batches do)."""
    i = 0
    while i < len(rows):
        if rng.random() < 0.5:
            column.add(rows[i])
            i += 1
            continue
        batch = rows[i : i + rng.randrange(1, 40)]
        names = sorted({g for r in batch for g in r} | {"unused"}, key=lambda g: rng.random())
        sums = np.array([[r.get(g, 0) for g in names] for r in batch], np.int64)
        column.add_many(names, sums, None)
        # add_many keeps a row's names in the order of ``names``: so does the reference
        for k, r in enumerate(batch):
            rows[i + k] = {g: r[g] for g in names if g in r}
        i += len(batch)


def _read(owner: object, name: str, order: np.ndarray, release: bool) -> list[dict]:
    column: _Sparse = getattr(owner, name)
    names = column.names.names
    entries = sorted_entries(owner, name, order, release)
    out, lo = [], 0
    for end in entries.ends.tolist():
        out.append(
            {
                names[k]: v
                for k, v in zip(
                    entries.keys[lo:end].tolist(), entries.values[lo:end].tolist(), strict=True
                )
            }
        )
        lo = end
    return out


class _Owner:
    def __init__(self, column: _Sparse) -> None:
        self.column = column


@pytest.mark.parametrize("max_sets", [0xFFFF, 6, 0])
def test_sparse_rows_read_back_in_any_order_in_either_form(monkeypatch, max_sets):
    # max_sets 6: the column turns explicit part of the way through; 0: from the start.
    monkeypatch.setattr(_sparse, "_MAX_SETS", max_sets)
    rng = random.Random(max_sets)
    for n in (0, 1, 300):
        rows = _rows(rng, n)
        column = _Sparse(_Names())
        _fill(column, rows, rng)
        assert (column.sets is None) == (n > 0 if max_sets == 0 else max_sets < 0xFFFF and n > 1)
        order = np.array(rng.sample(range(n), n), np.int64)
        for release in (False, True):
            owner = _Owner(column)
            assert _read(owner, "column", order, release) == [rows[i] for i in order]
            if release:
                assert len(owner.column.values) == 0  # the rows were given up


@pytest.mark.parametrize("forms", [(0xFFFF, 0xFFFF), (0, 0xFFFF), (0xFFFF, 0), (8, 8)])
def test_columns_of_either_form_merge_into_the_rows_of_both(monkeypatch, forms):
    rng = random.Random(sum(forms))
    first_rows, second_rows = _rows(rng, 200), _rows(rng, 150)
    columns = []
    for max_sets, rows in zip(forms, (first_rows, second_rows), strict=True):
        monkeypatch.setattr(_sparse, "_MAX_SETS", max_sets)
        names = _Names()
        for g in rng.sample(NAMES, len(NAMES)):  # the two tables number the names apart
            names.of(g)
        column = _Sparse(names)
        _fill(column, rows, rng)
        columns.append(column)
    monkeypatch.setattr(_sparse, "_MAX_SETS", min(forms))
    first, second = columns
    remap = np.array([first.names.of(g) for g in second.names.names], np.int32)
    first.extend(second, remap)
    assert len(second.values) == 0 and len(second.rows) == 0  # let go as merged
    assert (first.sets is None) == (min(forms) < 0xFFFF)
    order = np.arange(350)
    assert _read(_Owner(first), "column", order, False) == first_rows + second_rows


def test_float_columns_and_empty_rows_keep_their_values():
    rng = random.Random(4)
    rows = _rows(rng, 100, float_values=True) + [{}, {}, {"g1": 0.5}]
    column = _Sparse(_Names(), "d")
    for r in rows:
        column.add(r)
    assert len(column.sets.names) <= 2 ** len(NAMES)
    assert _read(_Owner(column), "column", np.arange(len(rows)), False) == rows


@pytest.mark.parametrize("names", [0, 1, 5, 64, 70])
def test_the_key_sets_of_a_batch_are_its_distinct_rows(names):
    # The fast ways (all rows alike; rows numbered by their bits up to 64 names) and
    # np.unique past that give the same distinct rows and each row's index among them.
    rng = np.random.default_rng(names)
    for n in (0, 1, 50):
        for keep in (rng.random((n, names)) < 0.5, np.ones((n, names), bool)):
            patterns, inverse = _sparse._patterns(keep)
            assert inverse.shape == (n,)
            assert (patterns[inverse] == keep).all()
            assert len({tuple(r) for r in patterns.tolist()}) == len(patterns)
