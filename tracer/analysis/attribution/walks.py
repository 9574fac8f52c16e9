"""The scalar path's per-trace arithmetic over a batch of traces of one shape:
(traces, spans) int64 arrays, one numpy step per span of the shape.

Each function is its scalar twin, step for step (``prepare._fix_clocks``,
``critical_path.ttft_view``, and the dependency model's walk of
:mod:`tracer.analysis.model.dependencies`), on the same nanoseconds:
:mod:`tracer.analysis.attribution.batches` batches the traces, these walk them.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from tracer.analysis.model.dependencies import TOLERANCE_MAX_NS, TOLERANCE_MIN_NS

__all__ = ["Tree", "fix_clocks", "own_times", "sums", "ttft_view"]


class Tree(Protocol):
    """What the walks read of a shape: its tree and its remote edges."""

    root: int
    order: list[int]
    parent: list[int]
    children: list[list[int]]
    #: each span's children that hold it up (``dependencies``: not a CONSUMER under a
    #: PRODUCER), the walk's tree
    kids: list[list[int]]
    #: (parent, its remote children, parent is CLIENT, per child: exempt from the skew
    #: check) in the order the scalar clock correction visits them
    edges: list[tuple[int, list[int], bool, list[bool]]]


def fix_clocks(tree: Tree, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """``prepare._fix_clocks`` over the batch: CLIENT ends widened in place; True for
    the traces whose skew the scalar path must correct (it shifts subtrees)."""
    skewed = np.zeros(start.shape[0], bool)
    for p, remote, client, exempt in tree.edges:
        if client:
            for c in remote:
                widen = (
                    (start[:, p] <= start[:, c])
                    & (start[:, c] <= end[:, p])
                    & (end[:, p] < end[:, c])
                    & (end[:, c] - start[:, c] > end[:, p] - start[:, p])
                )
                end[:, p] = np.where(widen, end[:, c], end[:, p])
        for c, skip in zip(remote, exempt, strict=True):
            if skip:
                continue
            inside = (start[:, c] >= start[:, p]) & (end[:, c] <= end[:, p])
            duration, room = end[:, c] - start[:, c], end[:, p] - start[:, p]
            delta = np.where(
                duration <= room,
                start[:, p] + (room - duration) // 2 - start[:, c],
                start[:, p] - start[:, c],
            )
            skewed |= ~inside & (delta != 0)
    return skewed


def ttft_view(
    tree: Tree,
    start: np.ndarray,
    end: np.ndarray,
    marks: np.ndarray,
    has: np.ndarray,
    point: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """``critical_path.ttft_view`` over the batch (``has``: which spans have a mark):
    each span's end and inclusion."""
    latest, known = marks.copy(), has.copy()
    for i in reversed(tree.order):  # bottom-up: carry marks to ancestors without one
        p = tree.parent[i]
        if p >= 0:
            carry = ~has[:, p] & known[:, i] & (~known[:, p] | (latest[:, i] > latest[:, p]))
            latest[:, p] = np.where(carry, latest[:, i], latest[:, p])
            known[:, p] |= carry
    ends = np.minimum(np.where(known, latest, end), point[:, None])
    included = start < point[:, None]
    included[:, tree.root] = True
    ends[:, tree.root] = point
    return ends, included


def own_times(
    tree: Tree, start: np.ndarray, end: np.ndarray, included: np.ndarray | None
) -> np.ndarray:
    """``critical_path.own_times`` over the batch: (traces, spans) own times.

    The dependency model of :mod:`tracer.analysis.model.dependencies` for every trace at
    once: per parent, its kids clipped to it, which earlier siblings each kid waits
    for (with the clock tolerance), the ends taken back where a tolerated overlap
    was, then the walk from the kid that ended last through the siblings waited for.
    """
    b = start.shape[0]
    rows = np.arange(b)
    own = np.zeros(start.shape, np.int64)
    lo = np.zeros(start.shape, np.int64)
    hi = np.zeros(start.shape, np.int64)
    active = np.zeros(start.shape, bool)
    root = tree.root
    lo[:, root], hi[:, root], active[:, root] = start[:, root], end[:, root], True
    for s in tree.order:
        a = active[:, s]
        low = lo[:, s]
        high = np.maximum(hi[:, s], low)  # an interval that ends before it starts
        kids = tree.kids[s]
        alone = np.where(a, high - low, 0)
        if not kids:
            own[:, s] = alone
            continue
        if len(kids) == 1:
            c = kids[0]
            cs = np.maximum(start[:, c], low)
            ce = np.minimum(end[:, c], high)
            ok = a & (cs < high) & (ce >= cs)
            if included is not None:
                ok &= included[:, c]
            own[:, s] = np.where(ok, (high - ce) + (cs - low), alone)
            lo[:, c], hi[:, c], active[:, c] = cs, ce, ok
            continue
        k = np.array(kids)
        m = len(kids)
        cs = np.maximum(start[:, k], low[:, None])
        ce = np.minimum(end[:, k], high[:, None])
        valid = a[:, None] & (cs < high[:, None]) & (ce >= cs)
        if included is not None:
            valid &= included[:, k]
        tolerance = np.clip((high - low) // 100, TOLERANCE_MIN_NS, TOLERANCE_MAX_NS)
        # before[t, i, j]: in trace t, kid j waits for kid i (i started before j and
        # ended at or before j's start, give or take the tolerance).
        before = (
            valid[:, :, None]
            & valid[:, None, :]
            & (cs[:, :, None] < cs[:, None, :])
            & (ce[:, :, None] <= cs[:, None, :] + tolerance[:, None, None])
        )
        # A tolerated overlap: the end is taken back to the first start it waits for.
        he = np.minimum(ce, np.where(before, cs[:, None, :], _MAX).min(axis=2))
        index = np.broadcast_to(np.arange(m), cs.shape)
        keys = (he, ce, cs)
        last = _latest(valid, keys, index)
        # waited[t, j]: the latest-ending kid that kid j waits for (-1: its parent's start)
        waited = _latest(
            before.transpose(0, 2, 1), tuple(x[:, None, :] for x in keys), index[:, None, :]
        )
        waited = np.where(before.any(axis=1), waited, -1)
        going = valid.any(axis=1)
        pos = np.where(going, last, 0)
        mine = high - he[rows, pos]
        for _ in range(m):
            if not going.any():
                break
            child = k[pos]
            lo[rows[going], child[going]] = cs[rows, pos][going]
            hi[rows[going], child[going]] = he[rows, pos][going]
            active[rows[going], child[going]] = True
            nxt = waited[rows, pos]
            ends = nxt < 0
            gap = cs[rows, pos] - np.where(ends, low, he[rows, np.maximum(nxt, 0)])
            mine += np.where(going, gap, 0)
            going &= ~ends
            pos = np.where(going, nxt, pos)
        own[:, s] = np.where(a & valid.any(axis=1), mine, alone)
    return own


_MAX = np.iinfo(np.int64).max
_MIN = np.iinfo(np.int64).min


def _latest(mask: np.ndarray, keys: tuple[np.ndarray, ...], index: np.ndarray) -> np.ndarray:
    """Along the last axis, the position among ``mask`` with the largest ``keys`` (in
    turn), then the largest ``index``: the tie-break of the dependency model."""
    candidates = mask
    for key in keys:
        top = np.where(candidates, key, _MIN).max(axis=-1, keepdims=True)
        candidates = candidates & (key == top)
    ranked = np.where(candidates, index, -1)
    return ranked.argmax(axis=-1)


def sums(own: np.ndarray, column: np.ndarray, width: int) -> np.ndarray:
    """(traces, width) sums of ``own`` by each span's column (-1: none)."""
    out = np.zeros((own.shape[0], width), np.int64)
    for i, col in enumerate(column.tolist()):
        if col >= 0:
            out[:, col] += own[:, i]
    return out
