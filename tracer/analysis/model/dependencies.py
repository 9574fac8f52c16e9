"""Which span waits for which: the one dependency model of a trace
(``docs/analysis.md``, the dependency model).

The critical-path walk (:func:`critical_times`), the what-if retiming
(:func:`retime`) and the batch walks (:mod:`tracer.analysis.attribution.walks`) all read a
trace through this model, so that a span's critical-path time is exactly what
finishing it a little sooner saves wherever the critical path is unique.

The rules, for a span P and its children (each first clipped to P's interval):

- P **ends** its own trailing time after the latest end of the children it waits for.
- A child that is not blocking is left out with its subtree: a CONSUMER child of a
  PRODUCER span (a producer does not wait for its consumer), and, in the time to
  first token view, the spans that view leaves out.
- A child C **starts** its own offset (P's time) after the latest end among its
  *earlier siblings*: the children that started before C and ended at or before C's
  start, give or take the clock tolerance. Without one it starts its offset after
  P's start. C waits for all of them (a join), not for the latest alone: if that
  one finishes sooner, C then waits for the next.
- **Clock tolerance.** An earlier sibling may end up to :func:`tolerance_ns` after C's
  start and still count as finished before it (clock granularity, small skew between
  hosts): 1% of P's duration, at least 1 us and at most 1 ms. Such an overlap is read
  as measurement error: the sibling's end is taken as C's start. A sibling that
  overlaps C by more ran in parallel with it, and C did not wait for it.

Ties (two candidates ending at the same instant) are broken by the latest real end,
then the latest start, then the later child: the walk charges that branch. A what-if
of one of tied branches alone saves nothing, since the join still waits for the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

__all__ = [
    "TOLERANCE_MAX_NS",
    "TOLERANCE_MIN_NS",
    "TOLERANCE_SHARE",
    "Dependencies",
    "critical_sections",
    "critical_times",
    "dependencies",
    "retime",
    "tolerance_ns",
]

N = TypeVar("N", int, float)

#: The clock tolerance: this share of the parent's duration ...
TOLERANCE_SHARE = 0.01
#: ... but at least this (the microsecond of Jaeger JSON) ...
TOLERANCE_MIN_NS = 1_000
#: ... and at most this (sibling calls overlapping by more ran in parallel).
TOLERANCE_MAX_NS = 1_000_000


def tolerance_ns(duration_ns: int) -> int:
    """How far an earlier sibling may overlap a child's start and still count as
    finished before it, in a parent of ``duration_ns``."""
    share = duration_ns // 100  # TOLERANCE_SHARE, in integers
    return TOLERANCE_MIN_NS if share < TOLERANCE_MIN_NS else min(share, TOLERANCE_MAX_NS)


@dataclass(slots=True)
class Dependencies:
    """The dependency model of one trace (or of its time-to-first-token view).

    ``lo``/``hi`` are each span's effective interval: clipped to its parent, its end
    taken back to the start of a later sibling it is tolerated to overlap. ``kids``
    are each span's children that hold it up, in start order. Most spans' kids are a
    plain sequence (each started after the one before ended): each waits for the one
    before it. The other spans are ``tangled``; for their kids, ``joins[c]`` are the
    earlier siblings that kid ``c`` is the first (in start order) to wait for (it waits
    for those and for everything its predecessors waited for), and ``real_hi[c]`` its
    end clipped to its parent only (the first tie-break). Spans outside the model
    (left out, not blocking, clipped away) have no kids and are in no one's kids.
    """

    root: int
    lo: list[int]
    hi: list[int]
    kids: list[Sequence[int]]
    tangled: set[int]
    joins: dict[int, list[int]]
    real_hi: dict[int, int]


_NONE: tuple[int, ...] = ()


def dependencies(
    root: int,
    children: Sequence[Sequence[int]],
    start: Sequence[int],
    end: Sequence[int],
    included: Sequence[bool] | None = None,
    blocking: Sequence[bool] | None = None,
) -> Dependencies:
    """The dependency model of a trace with these times (ns).

    Args:
        root: index of the root span.
        children: children of each span.
        start, end: span times.
        included: when given, spans marked False are left out (with their subtrees).
        blocking: when given, children marked False do not hold their parent up (a
            CONSUMER under a PRODUCER); they are left out with their subtrees.
    """
    n = len(start)
    lo = list(start)
    hi = list(end)
    kids: list[Sequence[int]] = [_NONE] * n
    tangled: set[int] = set()
    joins: dict[int, list[int]] = {}
    real_hi: dict[int, int] = {}
    if hi[root] < lo[root]:
        hi[root] = lo[root]
    stack = [root]
    while stack:
        p = stack.pop()
        p_lo, p_hi = lo[p], hi[p]
        below = children[p]
        if not below:
            continue
        if len(below) == 1:
            # One child, the common case in a chain of calls: no sibling to wait for.
            c = below[0]
            if (included is None or included[c]) and (blocking is None or blocking[c]):
                cs = start[c] if start[c] > p_lo else p_lo
                ce = end[c] if end[c] < p_hi else p_hi
                if cs < p_hi and ce >= cs:
                    lo[c], hi[c] = cs, ce
                    kids[p] = below
                    stack.append(c)
            continue
        mine = []
        for c in below:
            if (included is not None and not included[c]) or (
                blocking is not None and not blocking[c]
            ):
                continue
            cs = start[c] if start[c] > p_lo else p_lo
            ce = end[c] if end[c] < p_hi else p_hi
            if cs >= p_hi or ce < cs:
                continue  # outside the parent's (clipped) interval
            lo[c], hi[c] = cs, ce
            mine.append(c)
        if not mine:
            continue
        if len(mine) > 1 and not _plain(mine, lo, hi):
            mine.sort(key=lambda c: (lo[c], hi[c], c))
            if not _plain(mine, lo, hi):
                # Not a plain sequence: who waits for whom, with the tolerance.
                tangled.add(p)
                for k in mine:
                    real_hi[k] = hi[k]
                _join(mine, lo, hi, joins, tolerance_ns(p_hi - p_lo))
        kids[p] = mine
        stack.extend(mine)
    return Dependencies(root, lo, hi, kids, tangled, joins, real_hi)


def _plain(mine: list[int], lo: list[int], hi: list[int]) -> bool:
    """Whether these siblings, in this order, each started after the one before ended."""
    previous = mine[0]
    for c in mine[1:]:
        if lo[c] <= lo[previous] or hi[previous] > lo[c]:
            return False
        previous = c
    return True


def _join(
    mine: list[int], lo: list[int], hi: list[int], joins: dict[int, list[int]], tolerance: int
) -> None:
    """Fill ``joins`` for one span's children ``mine`` (in start order), and take the end
    of a sibling tolerated to overlap a later child's start back to that start.

    A sibling joins the wait of the first child (in start order) that started after it
    and no earlier than its end less the tolerance; every later child waits for it too.
    Siblings sorted by end are taken in once each, so this is O(n log n).
    """
    by_end = sorted(mine, key=lambda c: (hi[c], lo[c], c))
    taken = 0
    waiting: list[int] = []  # ended early enough, but started no earlier than the child
    for c in mine:
        c_lo = lo[c]
        threshold = c_lo + tolerance
        while taken < len(by_end) and hi[by_end[taken]] <= threshold:
            waiting.append(by_end[taken])
            taken += 1
        if not waiting:
            continue
        ready = [a for a in waiting if lo[a] < c_lo]
        if not ready:
            continue
        if len(ready) < len(waiting):
            waiting = [a for a in waiting if lo[a] >= c_lo]
        else:
            waiting = []
        for a in ready:
            if hi[a] > c_lo:
                hi[a] = c_lo  # a tolerated overlap: it ended when c started
        joins[c] = ready


def _later(a: int, b: int, hi: Sequence[N], real_hi: dict[int, int], lo: Sequence[int]) -> bool:
    """Whether ``a`` ends later than ``b`` by the tie-break (end, real end, start, index)."""
    if hi[a] != hi[b]:
        return hi[a] > hi[b]
    if real_hi[a] != real_hi[b]:
        return real_hi[a] > real_hi[b]
    if lo[a] != lo[b]:
        return lo[a] > lo[b]
    return a > b


def _path(deps: Dependencies, kids: Sequence[int], hi: Sequence[N]) -> list[int]:
    """The kids a tangled span's walk passes through, in start order: from the one that
    ended last back through the latest-ending sibling each waited for (``hi``: the
    model's ends or a retimed trace's; ties broken as the module docstring says)."""
    joins, real_hi, lo = deps.joins, deps.real_hi, deps.lo
    waited: dict[int, int] = {}
    best = last = -1
    for c in kids:  # in start order: each kid's wait set holds its predecessors'
        for a in joins.get(c, _NONE):
            if best < 0 or _later(a, best, hi, real_hi, lo):
                best = a
        waited[c] = best
        if last < 0 or _later(c, last, hi, real_hi, lo):
            last = c
    path = [last]
    while waited[path[-1]] >= 0:
        path.append(waited[path[-1]])
    path.reverse()
    return path


def critical_times(
    deps: Dependencies, lo: Sequence[N] | None = None, hi: Sequence[N] | None = None
) -> dict[int, N]:
    """Critical-path own time of each span that gets any: walking back from the root's
    end into the child that ended last, then into the latest-ending sibling it waited
    for, and so on; the time between is the parent's. Every instant of the root's
    interval goes to exactly one span.

    ``lo``/``hi``: other times for the same model (a retimed trace's); by default the
    model's own effective intervals.
    """
    if lo is None or hi is None:
        lo, hi = deps.lo, deps.hi  # type: ignore[assignment]
    assert lo is not None and hi is not None
    kids, tangled = deps.kids, deps.tangled
    own: dict[int, N] = {}
    stack = [deps.root]
    while stack:
        s = stack.pop()
        mine_kids = kids[s]
        if not mine_kids:
            if hi[s] > lo[s]:
                own[s] = hi[s] - lo[s]
            continue
        if s not in tangled:
            # A plain sequence: each kid waited for the one before, the last ended last.
            stack.extend(mine_kids)
            mine = (hi[s] - hi[mine_kids[-1]]) + (lo[mine_kids[0]] - lo[s])
            previous = mine_kids[0]
            for c in mine_kids[1:]:
                mine += lo[c] - hi[previous]
                previous = c
            if mine:
                own[s] = mine
            continue
        path = _path(deps, mine_kids, hi)
        mine = (hi[s] - hi[path[-1]]) + (lo[path[0]] - lo[s])
        stack.extend(path)
        for before, c in zip(path, path[1:], strict=False):
            mine += lo[c] - hi[before]
        if mine:
            own[s] = mine
    return own


def critical_sections(deps: Dependencies) -> list[tuple[int, int, int]]:
    """The critical path as (span, start, end) sections in time order: the instants
    :func:`critical_times` gives each span, one section per stretch."""
    lo, hi, kids, tangled = deps.lo, deps.hi, deps.kids, deps.tangled
    out: list[tuple[int, int, int]] = []
    stack = [deps.root]
    while stack:
        s = stack.pop()
        mine_kids = kids[s]
        if not mine_kids:
            out.append((s, lo[s], hi[s]))
            continue
        if s not in tangled:
            path = list(mine_kids)
        else:
            path = _path(deps, mine_kids, hi)
        cursor = lo[s]
        for c in path:
            out.append((s, cursor, lo[c]))
            cursor = hi[c]
            stack.append(c)
        out.append((s, cursor, hi[s]))
    return sorted((x for x in out if x[2] > x[1]), key=lambda x: (x[1], x[2]))


def retime(
    deps: Dependencies, factor: Sequence[float], extra: Sequence[float] | None = None
) -> tuple[list[float], list[float]]:
    """New (start, end) of every span in the model when each span's own time is
    multiplied by ``factor`` (the dependencies kept). Times are nanoseconds from the
    root's start (floats: small numbers keep their precision); spans outside the
    model keep 0.

    A child starts its offset (scaled by its parent's factor) after the latest new
    end of the siblings it waits for, or after its parent's new start; a span ends its
    trailing time (scaled by its own factor) after the latest new end of its kids,
    and ``extra[i]`` ns after that (time the change adds to the span: more calls).
    """
    n = len(deps.lo)
    lo, hi, kids, joins, tangled = deps.lo, deps.hi, deps.kids, deps.joins, deps.tangled
    new_start = [0.0] * n
    new_end = [0.0] * n
    # Depth first without recursion (chains of any depth): a frame per span whose kids
    # are being placed; a kid is placed only after its earlier siblings' whole
    # subtrees, since its start depends on their new ends.
    stack = [_Placing(deps.root)]
    while stack:
        frame = stack[-1]
        p = frame.span
        below = kids[p]
        if frame.next < len(below):
            c = below[frame.next]
            if p in tangled:
                joined: Sequence[int] = joins.get(c, _NONE)
            else:  # a plain sequence: the kid before
                joined = (below[frame.next - 1],) if frame.next else _NONE
            frame.next += 1
            for a in joined:
                if frame.joined < 0 or new_end[a] > frame.joined_end:
                    frame.joined_end = new_end[a]
                if frame.joined < 0 or hi[a] > hi[frame.joined]:
                    frame.joined = a
            if frame.joined >= 0:
                new_start[c] = frame.joined_end + (lo[c] - hi[frame.joined]) * factor[p]
            else:
                new_start[c] = new_start[p] + (lo[c] - lo[p]) * factor[p]
            if kids[c]:
                stack.append(_Placing(c))
            else:
                new_end[c] = new_start[c] + (hi[c] - lo[c]) * factor[c]
                if extra is not None:
                    new_end[c] += extra[c]
            continue
        stack.pop()
        if below:
            last = max(hi[c] for c in below)
            new_end[p] = max(new_end[c] for c in below) + (hi[p] - last) * factor[p]
        else:
            new_end[p] = new_start[p] + (hi[p] - lo[p]) * factor[p]
        if extra is not None:
            new_end[p] += extra[p]
    return new_start, new_end


class _Placing:
    """A span whose kids :func:`retime` is placing: the next kid's position, the latest
    new end among the siblings joined so far, and the one of them that ended last
    before (whose old end the next kid's offset is measured from)."""

    __slots__ = ("span", "next", "joined", "joined_end")

    def __init__(self, span: int) -> None:
        self.span = span
        self.next = 0
        self.joined = -1
        self.joined_end = 0.0
