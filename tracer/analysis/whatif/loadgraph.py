"""One request of a run as the load model replays it (``docs/whatif.md``): its
dependencies (:mod:`tracer.analysis.model.dependencies`, the one model the critical-path
walk and the retiming read), as a graph of stretches of own time.

Each span's own time is cut where its children start and end, as the retiming cuts
it: before each child, the offset the child starts after the siblings it waited for
(or after the span's start); after the last, the span's trailing time once all its
children have ended. Each piece is a node that waits for what the retiming makes it
wait for, so parallel branches run in parallel and join, and a sibling that was
hidden becomes critical when the other branch gets faster.

- **Pools.** A wait for a slot of a finite pool is not kept as time: it becomes a
  request for a slot, held to the end of the span that waited. A wait is a
  ``X.queue`` sub-stage (an engine's ``gen_ai.latency.time_in_queue``), or the
  ``hoptrace.pool.wait_ns`` of a span that records its pool (taken out of the span's
  first piece of own time, after a child ended, that can hold it).
- **First token.** The client's first-token mark goes into the piece of the critical
  path that holds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tracer import attributes as attrs
from tracer.analysis.model.breakdown import client_first_token
from tracer.analysis.model.critical_path import trace_dependencies
from tracer.analysis.model.dependencies import Dependencies, critical_sections
from tracer.analysis.model.prepare import PreparedTrace
from tracer.analysis.whatif.simulate import ACQUIRE, MARK, RELEASE, Step

__all__ = ["QUEUE", "Stretch", "Template", "keep_unsized", "template"]

#: The suffix of a pool's wait as a sub-stage.
QUEUE = ".queue"


@dataclass(frozen=True)
class Stretch:
    """A piece of a span's own time: its stage and length (ns)."""

    stage: str
    ns: float


@dataclass(frozen=True)
class Template:
    """A request as a graph: node ``i`` holds ``nodes[i]`` (stretches and pool and
    first-token steps) and starts once every node of ``after[i]`` has ended."""

    nodes: tuple[tuple[Stretch | Step, ...], ...]
    after: tuple[tuple[int, ...], ...]
    busy_ns: float  # the stretches' total (what the CPU demand is spread over)
    #: each span below the root as (its stage, its parent's stage, its first node, its
    #: last node): its subtree's nodes, what a call copied runs
    #: (:mod:`tracer.analysis.whatif.expand`)
    calls: tuple[tuple[str, str, int, int], ...] = ()

    @property
    def waited(self) -> bool:
        """Whether the request waited for a pool's slot."""
        return any(isinstance(x, Step) and x.kind == ACQUIRE for n in self.nodes for x in n)


class _Node:
    __slots__ = ("span", "a", "b", "after", "items")

    def __init__(self, span: int, a: int, b: int, after: list[int]) -> None:
        self.span, self.a, self.b, self.after = span, a, b, after
        self.items: list[Stretch | Step] = []


class _Frame:
    """A span whose kids are being placed: the node it started after, the next kid,
    and its own pieces so far."""

    __slots__ = ("span", "began", "next", "own")

    def __init__(self, span: int, began: int) -> None:
        self.span, self.began, self.next = span, began, 0
        self.own: list[int] = []


def template(
    trace: PreparedTrace, sizes: dict[str, int], seen: set[str]
) -> tuple[Template, float | None]:
    """The graph of one trace, and its time to first token (ns) or None; the pools it
    waited for go into ``seen``, their sizes into ``sizes``."""
    deps = trace_dependencies(trace)
    lo, hi, kids = deps.lo, deps.hi, deps.kids
    root = trace.root
    t0 = trace.start[root]
    point = client_first_token(trace)
    if point is not None and not t0 < point:
        point = None
    if point is not None:
        point = min(point, hi[root])
    takes, queue_of = _pools(trace, sizes)
    nodes: list[_Node] = [_Node(root, lo[root], lo[root], [])]
    end_of: dict[int, int] = {}  # span -> its last node
    first_of: dict[int, tuple[int, int]] = {}  # span -> its subtree's first node, parent
    releases: dict[int, list[str]] = {}  # span -> the pools it gives back at its end
    # Depth first, as the retiming places them: a kid's start waits for the ends of
    # the earlier siblings it joined, so their subtrees come first.
    stack = [_Frame(root, 0)]
    while stack:
        frame = stack[-1]
        p = frame.span
        below = kids[p]
        if frame.next < len(below):
            c = below[frame.next]
            if p in deps.tangled:
                joined: Sequence[int] = deps.joins.get(c, ())
            else:  # a plain sequence: the kid before
                joined = (below[frame.next - 1],) if frame.next else ()
            frame.next += 1
            if joined:
                last = max(joined, key=lambda a: hi[a])
                nodes.append(_Node(p, hi[last], lo[c], [end_of[a] for a in joined]))
            else:
                nodes.append(_Node(p, lo[p], lo[c], [frame.began]))
            frame.own.append(len(nodes) - 1)
            first_of[c] = (len(nodes), p)
            child = _Frame(c, len(nodes) - 1)
            if kids[c]:
                stack.append(child)
            else:
                nodes.append(_Node(c, lo[c], hi[c], [child.began]))
                end_of[c] = len(nodes) - 1
                child.own.append(end_of[c])
                _own(trace, child, nodes, takes, queue_of, releases, seen)
            continue
        stack.pop()
        after = [end_of[c] for c in below] or [frame.began]
        nodes.append(_Node(p, max((hi[c] for c in below), default=lo[p]), hi[p], after))
        end_of[p] = len(nodes) - 1
        frame.own.append(end_of[p])
        _own(trace, frame, nodes, takes, queue_of, releases, seen)
    for span, pools in releases.items():
        nodes[end_of[span]].items.extend(Step(RELEASE, pool=pool) for pool in pools)
    _mark(trace, deps, nodes, point)
    busy = sum(x.ns for n in nodes for x in n.items if isinstance(x, Stretch))
    calls = tuple(
        (trace.stage[c], trace.stage[parent], first, end_of[c])
        for c, (first, parent) in first_of.items()
    )
    graph = Template(
        tuple(tuple(n.items) for n in nodes), tuple(tuple(n.after) for n in nodes), busy, calls
    )
    return graph, None if point is None else float(point - t0)


def _pools(
    trace: PreparedTrace, sizes: dict[str, int]
) -> tuple[dict[int, tuple[str, int]], dict[int, str]]:
    """Where each pool's slot is taken: spans that recorded a wait (span -> (pool,
    wait ns)), and queue sub-stages (span -> pool)."""
    takes: dict[int, tuple[str, int]] = {}
    for i, s in enumerate(trace.spans):
        name = s.attributes.get(attrs.POOL_NAME) if s.attributes else None
        if isinstance(name, str) and name:
            size = s.attributes.get(attrs.POOL_SIZE)
            if isinstance(size, int) and size > 0:
                sizes.setdefault(name, size)
            wait = s.attributes.get(attrs.POOL_WAIT_NS)
            takes[i] = (name, wait if isinstance(wait, int) and wait > 0 else 0)
    queue_of: dict[int, str] = {}
    for i, stage in enumerate(trace.stage):
        owner = trace.parent[i]
        if stage.endswith(QUEUE) and owner >= 0:
            queue_of[i] = takes[owner][0] if owner in takes else stage[: -len(QUEUE)]
            takes.pop(owner, None)  # the queue sub-stage is where it waited
    return takes, queue_of


def _own(
    trace: PreparedTrace,
    frame: _Frame,
    nodes: list[_Node],
    takes: dict[int, tuple[str, int]],
    queue_of: dict[int, str],
    releases: dict[int, list[str]],
    seen: set[str],
) -> None:
    """The items of a span's own pieces: stretches of its stage, or its wait for a pool."""
    p = frame.span
    stage = trace.stage[p]
    if p in queue_of and len(frame.own) == 1:
        node = nodes[frame.own[0]]
        pool = queue_of[p]
        seen.add(pool)
        node.items.append(Step(ACQUIRE, ns=float(node.b - node.a), pool=pool))
        releases.setdefault(trace.parent[p], []).append(pool)
        return
    take = takes.get(p)
    for k, index in enumerate(frame.own):
        node = nodes[index]
        a = node.a
        # A recorded wait: in the first piece after a child (or the only one) that holds it.
        if take is not None and (k or len(frame.own) == 1) and node.b - a >= take[1]:
            pool, wait = take
            seen.add(pool)
            node.items.append(Step(ACQUIRE, ns=float(wait), pool=pool))
            releases.setdefault(p, []).append(pool)
            node.a = a = a + wait
            take = None
        if node.b > a:
            node.items.append(Stretch(stage, float(node.b - a)))


def _mark(trace: PreparedTrace, deps: Dependencies, nodes: list[_Node], point: int | None) -> None:
    """The first-token mark, in the piece of the critical path that holds ``point``
    (at the end when there is none)."""
    target = None
    if point is not None:
        span = next((i for i, a, b in critical_sections(deps) if a < point <= b), None)
        target = next((n for n in nodes if n.span == span and n.a < point <= n.b and n.items), None)
    if target is None or point is None:
        nodes[-1].items.append(Step(MARK))
        return
    for k, x in enumerate(target.items):
        if isinstance(x, Stretch):
            before = float(point - target.a)
            target.items[k : k + 1] = [
                *([Stretch(x.stage, before)] if before > 0 else []),
                Step(MARK),
                *([Stretch(x.stage, x.ns - before)] if x.ns - before > 0 else []),
            ]
            return
    target.items.append(Step(MARK))


def keep_unsized(t: Template, unsized: Sequence[str]) -> Template:
    """A pool of unknown size keeps its waits as measured (as time, not a queue)."""
    if not unsized:
        return t
    nodes = []
    for node in t.nodes:
        items: list[Stretch | Step] = []
        for x in node:
            if isinstance(x, Step) and x.pool in unsized:
                if x.kind == ACQUIRE and x.ns > 0:
                    items.append(Stretch(x.pool + QUEUE, x.ns))
                continue
            items.append(x)
        nodes.append(tuple(items))
    return Template(tuple(nodes), t.after, t.busy_ns, t.calls)
