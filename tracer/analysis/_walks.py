"""The scalar path's per-trace arithmetic over a batch of traces of one shape:
(traces, spans) int64 arrays, one numpy step per span of the shape.

Each function is its scalar twin, step for step (``prepare._fix_clocks``,
``critical_path.ttft_view``, ``critical_path.own_times``), on the same nanoseconds:
:mod:`tracer.analysis._shapes` batches the traces, these walk them.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

__all__ = ["Tree", "fix_clocks", "own_times", "sums", "ttft_view"]


class Tree(Protocol):
    """What the walks read of a shape: its tree and its remote edges."""

    root: int
    order: list[int]
    parent: list[int]
    children: list[list[int]]
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
    """``critical_path.own_times`` over the batch: (traces, spans) own times."""
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
        kids = tree.children[s]
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
        cs = np.maximum(start[:, k], low[:, None])
        ce = np.minimum(end[:, k], high[:, None])
        valid = a[:, None] & (cs < high[:, None]) & (ce >= cs)
        if included is not None:
            valid &= included[:, k]
        # Latest clipped end first, ties to the latest real end, then start, then index.
        ranked = np.lexsort((np.broadcast_to(k, cs.shape), cs, end[:, k], ce), axis=1)[:, ::-1]
        cursor = high.copy()
        mine = np.zeros(b, np.int64)
        for j in range(len(kids)):
            pos = ranked[:, j]
            c_start, c_end = cs[rows, pos], ce[rows, pos]
            take = valid[rows, pos] & (c_start < cursor)
            clipped = np.minimum(c_end, cursor)
            mine += np.where(take, cursor - clipped, 0)
            child = k[pos]
            lo[rows, child] = c_start
            hi[rows, child] = clipped
            active[rows, child] = take
            cursor = np.where(take, c_start, cursor)
        mine += cursor - low
        own[:, s] = np.where(a & valid.any(axis=1), mine, alone)
    return own


def sums(own: np.ndarray, column: np.ndarray, width: int) -> np.ndarray:
    """(traces, width) sums of ``own`` by each span's column (-1: none)."""
    out = np.zeros((own.shape[0], width), np.int64)
    for i, col in enumerate(column.tolist()):
        if col >= 0:
            out[:, col] += own[:, i]
    return out
