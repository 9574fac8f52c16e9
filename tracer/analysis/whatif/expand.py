"""More calls of a stage, in both models (``docs/whatif.md``, more calls): what a
scenario's :meth:`~tracer.analysis.whatif.scenario.Scenario.calls` does to a request.

A call is the outermost span of the stage (its parent is not in it) with its subtree:
the app's call to the model, with the model server's span and its queue, prefill and
decode under it.

- **In sequence** (N calls one after another, the last one giving the answer): the
  call takes N times its time. The retiming adds N-1 times the call's retimed length
  at its end; the load model runs N-1 copies of the call's piece of the request graph
  before it, each taking a slot of its pools and its CPU.
- **In parallel** (best-of-N: N calls at once, the request waits for the slowest and
  then answers, so the first token comes after the slowest too): the N-1 other calls'
  times are drawn from the same stage's calls in the run (:func:`call_times`), picked
  by a seeded hash of the trace and the call (deterministic, whatever the order the
  traces are read in), and scaled as the call itself is by the change. The retiming
  adds the longest of the N less the call's own; the load model runs the drawn calls'
  pieces of the graph beside it, joined after the slowest.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterable, Mapping, Sequence

from tracer.analysis.model.critical_path import trace_dependencies
from tracer.analysis.model.dependencies import Dependencies, retime
from tracer.analysis.model.prepare import PreparedTrace, StageMap, prepare
from tracer.analysis.model.traceset import TraceSet
from tracer.analysis.whatif.loadgraph import Stretch, Template
from tracer.analysis.whatif.scenario import Calls, Scenario
from tracer.analysis.whatif.simulate import ACQUIRE, MARK, RELEASE, Step
from tracer.spans.model import Warnings

__all__ = [
    "SEED",
    "Added",
    "call_roots",
    "call_times",
    "expand_template",
    "expand_templates",
    "extra_ns",
    "retime_with_calls",
    "ttft_extra_ns",
]

#: The seed of the draws of parallel calls.
SEED = 41

#: The run's calls of each stage, ns (what the parallel copies are drawn from).
Draws = Mapping[str, Sequence[float]]


def call_roots(
    trace: PreparedTrace, deps: Dependencies, scenario: Scenario
) -> list[tuple[int, Calls]]:
    """The calls ``scenario`` makes more of in this trace: each outermost span of a
    stage called more than once (in the dependency model), with its calls."""
    out = []
    for i, stage in enumerate(trace.stage):
        calls = scenario.calls(stage)
        if calls.n < 2:
            continue
        p = trace.parent[i]
        if i != deps.root and (p < 0 or i not in deps.kids[p]):
            continue  # outside the dependency model
        while p >= 0 and scenario.calls(trace.stage[p]).n < 2:
            p = trace.parent[p]
        if p < 0:  # not inside a call already counted
            out.append((i, calls))
    return out


def call_times(
    traces: TraceSet | Sequence[PreparedTrace],
    scenario: Scenario,
    stage_map: StageMap | None = None,
) -> dict[str, tuple[float, ...]]:
    """The length (ns) of every call of each stage ``scenario`` calls in parallel, as
    measured in the run: what the other calls of best-of-N are drawn from."""
    out: dict[str, list[float]] = {}
    prepared: Iterable[PreparedTrace | None] = (
        (prepare(t, spans, Warnings(), stage_map) for t, spans in traces.traces.items())
        if isinstance(traces, TraceSet)
        else traces
    )
    for trace in prepared:
        if trace is None:
            continue
        deps = trace_dependencies(trace)
        for r, calls in call_roots(trace, deps, scenario):
            if calls.parallel:
                out.setdefault(calls.of, []).append(float(deps.hi[r] - deps.lo[r]))
    return {k: tuple(sorted(v)) for k, v in out.items()}


def _pick(key: str, call: int, j: int, size: int) -> int:
    """The index of the ``j``-th other call drawn for ``call`` of trace ``key``."""
    return zlib.crc32(f"{SEED}/{key}/{call}/{j}".encode()) % size


def extra_ns(
    trace: PreparedTrace,
    deps: Dependencies,
    scenario: Scenario,
    new_start: Sequence[float],
    new_end: Sequence[float],
    draws: Draws,
) -> dict[int, float]:
    """The time each call adds at its end (ns), from the trace retimed without it:
    N-1 times its length in sequence; in parallel, the longest of it and the N-1
    drawn calls (scaled as the call is) less its own."""
    out: dict[int, float] = {}
    for r, calls in call_roots(trace, deps, scenario):
        length = new_end[r] - new_start[r]
        if not calls.parallel:
            out[r] = (calls.n - 1) * length
            continue
        pool = draws.get(calls.of) or ()
        was = deps.hi[r] - deps.lo[r]
        ratio = length / was if was > 0 else 1.0
        longest = length
        for j in range(calls.n - 1):
            if pool:
                longest = max(longest, pool[_pick(trace.trace_id, r, j, len(pool))] * ratio)
        out[r] = longest - length
    return out


#: What a call made more than once adds (ns), by span: (its extra, its whole length
#: after the change, whether in parallel).
Added = dict[int, tuple[float, float, bool]]


def retime_with_calls(
    trace: PreparedTrace,
    deps: Dependencies,
    factor: Sequence[float],
    scenario: Scenario,
    draws: Draws,
) -> tuple[list[float], list[float], Added]:
    """The trace retimed under ``scenario``, its calls included, and what each call
    made more than once adds."""
    new_start, new_end = retime(deps, factor)
    extra = extra_ns(trace, deps, scenario, new_start, new_end, draws)
    if not extra:
        return new_start, new_end, {}
    added = [0.0] * len(factor)
    for r, ns in extra.items():
        added[r] = ns
    parallel = {r: c.parallel for r, c in call_roots(trace, deps, scenario)}
    out = {r: (ns, new_end[r] - new_start[r] + ns, parallel[r]) for r, ns in extra.items()}
    s, e = retime(deps, factor, added)
    return s, e, out


def ttft_extra_ns(
    view: Dependencies, factor: Sequence[float], calls: Added, included: Sequence[bool]
) -> list[float] | None:
    """What each call adds to the time-to-first-token view (None: nothing): the first
    token comes after the N-1 calls before the answer (in sequence: their time), or
    after the slowest of parallel ones (the call takes its whole length)."""
    if not calls:
        return None
    start, end = retime(view, factor)
    added = [0.0] * len(factor)
    for r, (extra, whole, parallel) in calls.items():
        if included[r]:
            added[r] = max(whole - (end[r] - start[r]), 0.0) if parallel else extra
    return added


# -- the load model: a request's graph with the calls ------------------------------


def _balanced(items: Sequence[Stretch | Step]) -> set[str]:
    """The pools whose slots a piece of a graph both takes and gives back."""
    count: dict[str, int] = {}
    for x in items:
        if isinstance(x, Step) and x.kind in (ACQUIRE, RELEASE):
            count[x.pool] = count.get(x.pool, 0) + (1 if x.kind == ACQUIRE else -1)
    return {p for p, c in count.items() if c == 0}


def _piece(
    t: Template, first: int, last: int
) -> tuple[list[list[Stretch | Step]], list[list[int]]]:
    """A call's nodes (first..last) as a graph of its own: indices from 0, a wait for
    a node before the call as -1, the first-token mark and unbalanced pool steps out."""
    flat = [x for node in t.nodes[first : last + 1] for x in node]
    keep = _balanced(flat)
    nodes = [
        [
            x
            for x in node
            if not (isinstance(x, Step) and (x.kind == MARK or (x.pool and x.pool not in keep)))
        ]
        for node in t.nodes[first : last + 1]
    ]
    after = [
        sorted({j - first if j >= first else -1 for j in a}) for a in t.after[first : last + 1]
    ]
    return nodes, after


def _outermost(t: Template, scenario: Scenario) -> list[tuple[int, int, Calls]]:
    """The calls ``scenario`` makes more of in a request's graph: the node ranges
    (first, last) of the outermost spans of stages called more than once."""
    found = sorted(
        (first, last, calls)
        for stage, _, first, last in t.calls
        if (calls := scenario.calls(stage)).n > 1
    )
    out: list[tuple[int, int, Calls]] = []
    for first, last, calls in found:  # a range inside the one before is inside its call
        if not out or first > out[-1][1]:
            out.append((first, last, calls))
    return out


def _donors(
    templates: Sequence[Template], scenario: Scenario
) -> dict[str, list[tuple[int, int, int]]]:
    """Every call of each stage called in parallel: (template, first node, last node)."""
    out: dict[str, list[tuple[int, int, int]]] = {}
    for k, t in enumerate(templates):
        for first, last, calls in _outermost(t, scenario):
            if calls.parallel:
                out.setdefault(calls.of, []).append((k, first, last))
    return out


def expand_templates(templates: Sequence[Template], scenario: Scenario) -> list[Template]:
    """Every request's graph with the calls ``scenario`` makes (module docstring); the
    parallel copies are other requests' calls of the stage, drawn with a seeded
    generator per request."""
    donors = _donors(templates, scenario)
    return [
        expand_template(t, scenario, templates, donors, random.Random(SEED + k))
        for k, t in enumerate(templates)
    ]


def expand_template(
    t: Template,
    scenario: Scenario,
    templates: Sequence[Template],
    donors: Mapping[str, Sequence[tuple[int, int, int]]],
    rng: random.Random,
) -> Template:
    """One request's graph with its calls (see :func:`expand_templates`)."""
    roots = _outermost(t, scenario)
    if not roots:
        return t
    nodes = [list(n) for n in t.nodes]
    after = [list(a) for a in t.after]
    # The last call first: the earlier ones' indices do not move.
    for first, last, calls in sorted(roots, key=lambda r: -r[0]):
        if calls.parallel:
            pool = donors.get(calls.of) or [(-1, first, last)]
            pieces = []
            for _ in range(calls.n - 1):
                k, a, b = pool[rng.randrange(len(pool))]
                pieces.append(_piece(t if k < 0 else templates[k], a, b))
        else:
            pieces = [_piece(t, first, last)] * (calls.n - 1)
        nodes, after = _insert(nodes, after, first, last, pieces, calls.parallel)
    return Template(
        tuple(tuple(n) for n in nodes), tuple(tuple(a) for a in after), t.busy_ns, t.calls
    )


def _insert(
    nodes: list[list[Stretch | Step]],
    after: list[list[int]],
    first: int,
    last: int,
    pieces: list[tuple[list[list[Stretch | Step]], list[list[int]]]],
    parallel: bool,
) -> tuple[list[list[Stretch | Step]], list[list[int]]]:
    """The graph with ``pieces`` put before the call first..last: one after another and
    then the call (in sequence), or beside it, joined where it is waited for (in
    parallel; the first-token mark after the join)."""
    entry = after[first]
    new_nodes = nodes[:first]
    new_after = after[:first]
    ends = []
    previous = entry
    for piece_nodes, piece_after in pieces:
        base = len(new_nodes)
        outside = previous if not parallel else entry
        for items, waits in zip(piece_nodes, piece_after, strict=True):
            new_nodes.append(list(items))
            mapped = sorted({w for j in waits for w in (outside if j < 0 else [base + j])})
            new_after.append(mapped or list(outside))
        ends.append(len(new_nodes) - 1)
        previous = [len(new_nodes) - 1]
    shift = len(new_nodes) - first

    def moved(j: int) -> int:
        return j + shift if j >= first else j

    marked = False
    for i in range(first, len(nodes)):
        items = list(nodes[i])
        waits = [moved(j) for j in after[i]]
        if i == first and not parallel and ends:
            waits = [ends[-1]]
        if (
            parallel
            and first <= i <= last
            and any(isinstance(x, Step) and x.kind == MARK for x in items)
        ):
            items = [x for x in items if not (isinstance(x, Step) and x.kind == MARK)]
            marked = True
        if parallel and i > last and last in after[i]:
            waits = sorted({*waits, *ends})
            if marked:
                items.insert(0, Step(MARK))
                marked = False
        new_nodes.append(items)
        new_after.append(waits)
    return new_nodes, new_after
