"""Critical-path attribution of one trace (``docs/analysis.md``, critical path) and its TTFT view.

:func:`own_times` walks back from the root's end into the last-finishing child,
repeatedly, as Jaeger UI and Uber's CRISP do, over the trace's dependency model
(:mod:`tracer.analysis.model.dependencies`, which the what-if reads too); every instant of
the root's interval goes to exactly one span, so the stage times of a trace sum to its
end-to-end time.
"""

from __future__ import annotations

from collections.abc import Sequence

from tracer.analysis.model.dependencies import Dependencies, critical_times, dependencies
from tracer.analysis.model.prepare import PreparedTrace

__all__ = ["marks", "own_times", "trace_dependencies", "trace_times", "ttft_view"]


def own_times(
    root: int,
    children: Sequence[Sequence[int]],
    start: Sequence[int],
    end: Sequence[int],
    included: Sequence[bool] | None = None,
    blocking: Sequence[bool] | None = None,
) -> dict[int, int]:
    """Critical-path own time (ns) of each span that gets any, over [start[root], end[root]]:
    :func:`~tracer.analysis.model.dependencies.critical_times` of the trace's dependency model.

    Args:
        root: index of the root span.
        children: children of each span.
        start, end: span times (ns).
        included: when given, spans marked False are left out.
        blocking: when given, children marked False do not hold their parent up.
    """
    return critical_times(dependencies(root, children, start, end, included, blocking))


def trace_dependencies(
    trace: PreparedTrace, end: Sequence[int] | None = None, included: Sequence[bool] | None = None
) -> Dependencies:
    """The dependency model of a prepared trace (or of its TTFT view: ``end``,
    ``included``)."""
    return dependencies(
        trace.root,
        trace.children,
        trace.start,
        trace.end if end is None else end,
        included,
        trace.blocking,
    )


def trace_times(
    trace: PreparedTrace, end: Sequence[int] | None = None, included: Sequence[bool] | None = None
) -> dict[int, int]:
    """:func:`own_times` of a prepared trace (or of its TTFT view: ``end``, ``included``)."""
    return critical_times(trace_dependencies(trace, end, included))


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
