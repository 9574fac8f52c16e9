"""Critical-path attribution of one trace (``docs/analysis.md``, critical path) and its TTFT view.

:func:`own_times` walks back from the root's end into the last-finishing child,
repeatedly, as Jaeger UI and Uber's CRISP do; every instant of the root's interval
goes to exactly one span, so the stage times of a trace sum to its end-to-end time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from tracer.analysis.prepare import PreparedTrace

__all__ = ["marks", "own_times", "ttft_view"]

N = TypeVar("N", int, float)


def own_times(
    root: int,
    children: Sequence[Sequence[int]],
    start: Sequence[N],
    end: Sequence[N],
    included: Sequence[bool] | None = None,
) -> dict[int, N]:
    """Critical-path own time (ns) of each span that gets any, over [start[root], end[root]].

    Args:
        root: index of the root span.
        children: children of each span.
        start, end: span times (ns).
        included: when given, spans marked False are left out.
    """
    own: dict[int, N] = {}
    stack = [(root, start[root], end[root])]
    while stack:
        s, lo, hi = stack.pop()
        if hi < lo:
            hi = lo
        below = children[s]
        if len(below) == 1 and (included is None or included[below[0]]):
            # One child, the common case in a chain of calls: no sorting needed.
            c = below[0]
            cs = start[c] if start[c] > lo else lo
            ce = end[c] if end[c] < hi else hi
            if cs < hi and ce >= cs:
                mine = (hi - ce) + (cs - lo)
                stack.append((c, cs, ce))
                if mine:
                    own[s] = mine
                continue
            below = ()
        if not below:
            if hi > lo:
                own[s] = hi - lo
            continue
        kids = []
        for c in children[s]:
            if included is not None and not included[c]:
                continue
            cs = start[c] if start[c] > lo else lo
            ce = end[c] if end[c] < hi else hi
            if cs >= hi or ce < cs:
                continue
            kids.append((ce, end[c], cs, c))
        if not kids:
            if hi > lo:
                own[s] = hi - lo
            continue
        # Latest (clipped) end first, ties to the latest real end; a candidate must
        # start before the cursor.
        kids.sort(reverse=True)
        cursor = hi
        mine = hi - hi  # zero of the time type
        for ce, _real_end, cs, c in kids:
            if cs >= cursor:
                continue  # parallel with a chosen sibling that started no later
            clipped = ce if ce < cursor else cursor
            mine += cursor - clipped
            stack.append((c, cs, clipped))
            cursor = cs
        mine += cursor - lo
        if mine:
            own[s] = mine
    return own


def marks(trace: PreparedTrace) -> list[int | None]:
    """Each span's first-token mark on the trace's corrected clock: shifted with the span
    when clock skew was corrected."""
    start = trace.start
    return [
        None if (m := s.first_token_ns) is None else m + start[i] - s.start_ns
        for i, s in enumerate(trace.spans)
    ]


def ttft_view(
    trace: PreparedTrace, first_token_ns: int, corrected: list[int | None] | None = None
) -> tuple[list[int], list[bool]]:
    """End times and inclusion of the TTFT view of ``trace`` up to ``first_token_ns``.

    A span with a first-token mark ends at its mark; a span without one whose
    descendants have marks ends at the latest of those; others are clipped to the
    point; spans that start at or after it are left out. ``corrected`` is
    :func:`marks` of the trace when the caller has it.
    """
    n = len(trace.spans)
    latest_mark = marks(trace) if corrected is None else list(corrected)
    for i in reversed(trace.order):  # bottom-up: carry marks to ancestors without one
        p = trace.parent[i]
        if p >= 0 and trace.spans[p].first_token_ns is None:
            mark = latest_mark[i]
            if mark is not None and (latest_mark[p] is None or mark > latest_mark[p]):  # type: ignore[operator]
                latest_mark[p] = mark
    ends = [0] * n
    included = [False] * n
    for i in range(n):
        if trace.start[i] >= first_token_ns and i != trace.root:
            continue
        mark = latest_mark[i]
        e = mark if mark is not None else trace.end[i]
        ends[i] = min(e, first_token_ns)
        included[i] = True
    ends[trace.root] = first_token_ns
    return ends, included
