"""One trace, made ready for attribution (``docs/analysis.md``: stages, first-token marks).

:func:`prepare` de-duplicates spans, finds the root, re-parents orphans, drops spans
caught in parent cycles, widens CLIENT spans that a remote child streams past,
corrects clock skew between hosts (services on one host share its clock), and resolves
each span's stage and network hop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tracer import attributes as attrs
from tracer.analysis.conventions.phases import (
    CHILD_SPANS,
    COORDINATOR_KEYS,
    engine_intervals,
)
from tracer.analysis.conventions.stage_map import (
    ENGINE_REQUEST,
    INVOCATION,
    LLM_CALL,
    StageMapRules,
    conventions,
)
from tracer.spans.model import (
    KIND_CLIENT,
    KIND_CONSUMER,
    KIND_INTERNAL,
    KIND_PRODUCER,
    Span,
    Warnings,
)

__all__ = ["PreparedTrace", "StageMap", "blocking_of", "phase_span", "prepare"]

#: A user's stage map (``--stage-map``).
StageMap = StageMapRules
_NETWORK, _OTHER, _INFERENCE = attrs.DERIVED_NETWORK, attrs.DERIVED_OTHER, attrs.INFERENCE
_SUB = _INFERENCE + "."


@dataclass
class PreparedTrace:
    """Parallel arrays over the usable spans of one trace; index 0..n-1, ``root`` first.

    ``start``/``end`` are skew-corrected nanoseconds; ``children`` lists each span's
    children (orphans are children of the root); ``stage`` is the resolved stage;
    ``hop`` is ``(from service, to service)`` for network spans, else None. The last
    ``synthetic`` spans are an engine request span's queue, prefill and decode
    intervals (``docs/analysis.md``, sub-stages), children of that span. ``coordinator``
    is the P/D coordinator span with its own time to first token, if any. ``blocking``
    marks the children that hold their parent up (None: all of them): a CONSUMER
    child of a PRODUCER span does not (``docs/analysis.md``, the dependency model).
    """

    trace_id: str
    spans: list[Span]
    root: int
    parent: list[int]
    children: list[list[int]]
    start: list[int]
    end: list[int]
    stage: list[str]
    hop: list[tuple[str, str] | None]
    order: list[int]
    synthetic: int = 0
    blocking: list[bool] | None = None
    #: the engine request spans given phases (their ``synthetic`` children come from
    #: ``engine_intervals``), top-down; with the Triton ``compute`` child each read
    #: (-1: none)
    engines: list[tuple[int, int]] | None = None
    #: The outermost prefill/decode coordinator span (llm-d's P/D proxy with its own
    #: time to first token), or -1.
    coordinator: int = -1
    #: The remote children that end past their parent on their parent's host: one
    #: clock, so not skew (``docs/analysis.md``, the dependency model, rule 6).
    one_clock: frozenset[int] = frozenset()

    @property
    def e2e_ns(self) -> int:
        """End-to-end time: the root's (widened) end minus its start."""
        return self.end[self.root] - self.start[self.root]


def prepare(
    trace_id: str,
    raw_spans: Sequence[Span],
    issues: Warnings,
    stage_map: StageMap | None = None,
) -> PreparedTrace | None:
    """Build a :class:`PreparedTrace`, or None when the trace has no root.

    Adjustments and drops are counted in ``issues``.
    """
    spans: list[Span] = []
    index: dict[str, int] = {}
    for s in raw_spans:
        kept = index.get(s.span_id)
        if kept is None:
            index[s.span_id] = len(spans)
            spans.append(s)
        elif _differs(spans[kept], s):
            # Exact copies (retries, overlapping exports) are dropped silently; a span id
            # reused with other content is a producer's bug worth a count.
            issues.duplicates += 1
            issues.note("spans that reuse another span's id with different content were dropped")
    n = len(spans)
    if n == 0:
        return None
    parent = [-1] * n
    for i, s in enumerate(spans):
        pid = s.parent_id
        if pid is not None and pid != s.span_id:
            parent[i] = index.get(pid, -1)
    parentless = [i for i in range(n) if parent[i] == -1]
    if not parentless:
        issues.note("traces whose spans all sit in parent cycles were skipped")
        issues.skipped_spans += n
        return None
    root = parentless[0]
    if len(parentless) > 1:
        root = max(
            parentless, key=lambda i: (spans[i].end_ns - spans[i].start_ns, -spans[i].start_ns)
        )
        for i in parentless:
            if i != root:
                parent[i] = root
                issues.orphans += 1
    children: list[list[int]] = [[] for _ in range(n)]
    for i in range(n):
        if parent[i] >= 0:
            children[parent[i]].append(i)
    # Breadth-first from the root: the top-down order; what it misses sits in a cycle.
    order = [root]
    for i in order:
        order.extend(children[i])
    if len(order) < n:
        dropped = n - len(order)
        issues.skipped_spans += dropped
        issues.note("spans caught in parent cycles were skipped")
        keep = set(order)
        for i in order:
            children[i] = [c for c in children[i] if c in keep]
    start = [s.start_ns for s in spans]
    end = [s.end_ns for s in spans]
    one_clock = _fix_clocks(spans, order, children, start, end, issues)
    stage, hop, engines, followers = _resolve_stages(
        spans, order, parent, children, root, stage_map
    )
    for i in followers:  # nested under the phase it follows: taken as its sibling
        p = parent[i]
        if p != root and p >= 0 and parent[p] >= 0 and "." in stage[p]:
            children[p].remove(i)
            parent[i] = parent[p]
            children[parent[i]].append(i)
    trace = PreparedTrace(trace_id, spans, root, parent, children, start, end, stage, hop, order)
    trace.blocking = blocking_of(spans, parent)
    if one_clock:
        trace.one_clock = frozenset(one_clock)
    if engines:
        # A P/D coordinator may write its time to first token below the engine request
        # (llm-d's sidecar, on the decode span): the outermost span of inference with it.
        for i in order:
            if stage[i].startswith(_INFERENCE) and _carries(spans[i].attributes, _COORDINATOR):
                trace.coordinator = i
                break
    if engines:
        _add_engine_phases(trace, engines)
    return trace


_COORDINATOR = tuple(sorted(COORDINATOR_KEYS))


def _carries(attributes: dict, keys: tuple[str, ...]) -> bool:
    """Whether ``attributes`` hold one of ``keys``."""
    for key in keys:
        if key in attributes:
            return True
    return False


def blocking_of(spans: Sequence[Span], parent: Sequence[int]) -> list[bool] | None:
    """Which spans hold their parent up, or None when all do: a CONSUMER child of a
    PRODUCER span does not (a producer does not wait for its consumer)."""
    if not any(s.kind == KIND_PRODUCER for s in spans):
        return None
    return [
        not (p >= 0 and s.kind == KIND_CONSUMER and spans[p].kind == KIND_PRODUCER)
        for s, p in zip(spans, parent, strict=False)
    ]


def _differs(a: Span, b: Span) -> bool:
    return (a.parent_id, a.start_ns, a.end_ns, a.name, a.service) != (
        b.parent_id,
        b.start_ns,
        b.end_ns,
        b.name,
        b.service,
    )


def _service_hosts(spans: Sequence[Span]) -> dict[str, str]:
    """Each service's ``host.name`` in one trace, as its spans carry it (hoptrace's
    server spans repeat it from the resource); a service seen on two hosts has none."""
    hosts: dict[str, str | None] = {}
    for s in spans:
        host = s.attributes.get(attrs.HOST_NAME)
        if isinstance(host, str) and host:
            hosts[s.service] = host if hosts.get(s.service, host) == host else None
    return {service: host for service, host in hosts.items() if host is not None}


def _fix_clocks(
    spans: list[Span],
    order: list[int],
    children: list[list[int]],
    start: list[int],
    end: list[int],
    issues: Warnings,
) -> set[int]:
    """Widen CLIENT spans that a remote child streams past and shift the remote
    children of another host's clock into their parents; the remote children found
    past their parent on its own host, which keep their times (not shifted, their
    parent not widened)."""
    hosts: dict[str, str] | None = None
    one_clock: set[int] = set()
    for p in order:
        kids = children[p]
        if not kids:
            continue
        service = spans[p].service
        remote = [c for c in kids if spans[c].service != service]
        if not remote:
            continue
        outside = [c for c in remote if start[c] < start[p] or end[c] > end[p]]
        if not outside:
            continue
        if hosts is None:
            hosts = _service_hosts(spans)
        host = hosts.get(service)
        if host is not None:
            # One host, one clock: a child past its parent is a stream's tail (the
            # client stopped at the last event while the server finished), not skew.
            # It keeps its times; the walk clips it to its parent, so the tail the
            # caller did not wait for is on no one's path.
            one_clock.update(c for c in outside if hosts.get(spans[c].service) == host)
        if spans[p].kind == KIND_CLIENT:
            # A CLIENT span that ended at the response headers while the server streamed
            # on: a remote child that starts inside it and is longer than it. (One that
            # is shorter but ends later is clock skew, centred below, unless both run on
            # one host.)
            for c in outside:
                if start[p] <= start[c] <= end[p] < end[c] and (
                    end[c] - start[c] > end[p] - start[p]
                ):
                    end[p] = end[c]
        for c in outside:
            if c in one_clock or (start[c] >= start[p] and end[c] <= end[p]):
                continue
            if spans[p].kind == KIND_PRODUCER or spans[c].kind == KIND_CONSUMER:
                continue  # messaging: the consumer need not run inside the producer
            duration, room = end[c] - start[c], end[p] - start[p]
            if duration <= room:
                delta = start[p] + (room - duration) // 2 - start[c]
            else:
                delta = start[p] - start[c]
            if delta == 0:
                continue
            stack = [c]
            c_service = spans[c].service
            while stack:
                i = stack.pop()
                start[i] += delta
                end[i] += delta
                issues.skew_adjusted += 1
                stack.extend(k for k in children[i] if spans[k].service == c_service)
    return one_clock


def _remote_below(spans: list[Span], order: list[int], parent: list[int]) -> list[bool]:
    """For each span: does a descendant run in another service (is the callee traced)?"""
    below = [False] * len(spans)
    for i in reversed(order):
        p = parent[i]
        if p >= 0 and (below[i] or spans[i].service != spans[p].service):
            below[p] = True
    return below


def _resolve_stages(
    spans: list[Span],
    order: list[int],
    parent: list[int],
    children: list[list[int]],
    root: int,
    stage_map: StageMap | None,
) -> tuple[list[str], list[tuple[str, str] | None], list[int], list[int]]:
    """Stage and hop of every span (``docs/analysis.md``, stage resolution), the
    engine request spans whose stage is ``inference``, and the spans that follow their
    parent though nested under it (a rule's ``after_parent``)."""
    n = len(spans)
    known = conventions()
    stage = [_OTHER] * n
    hop: list[tuple[str, str] | None] = [None] * n
    carried: list[str | None] = [None] * n
    in_engine = [False] * n
    engines: list[int] = []
    followers: list[int] = []
    remote_below: list[bool] | None = None
    for i in order:
        s = spans[i]
        p = parent[i] if i != root else -1
        inherited = carried[p] if p >= 0 else None
        inside = in_engine[p] if p >= 0 else False
        in_engine[i] = inside
        own = s.stage
        mapped = None
        if own is None and stage_map is not None:
            mapped = stage_map.match(s, inside)
            own = mapped.stage if mapped is not None else None
        rule = known.match(s, inside) if own is None or own == _INFERENCE else None
        chosen = mapped if mapped is not None else rule
        if chosen is not None and chosen.after_parent:
            followers.append(i)
        if own is not None:  # rules 1 and 2
            stage[i] = carried[i] = own
            if own == _INFERENCE and rule is not None and rule.role == ENGINE_REQUEST:
                engines.append(i)
                in_engine[i] = True
            continue
        carried[i] = inherited
        if s.kind == KIND_CLIENT:  # rule 3: a call into another service is network
            best = -1
            for c in children[i]:
                if spans[c].service != s.service and (
                    best < 0
                    or spans[c].end_ns - spans[c].start_ns
                    > spans[best].end_ns - spans[best].start_ns
                ):
                    best = c
            if best >= 0:
                stage[i] = _NETWORK
                hop[i] = (s.service, spans[best].service)
                continue
        if rule is not None:  # rule 4: a recognised convention
            if rule.role == LLM_CALL:
                if remote_below is None:
                    remote_below = _remote_below(spans, order, parent)
                got = (inherited or attrs.CANONICAL_STAGES[0]) if remote_below[i] else _INFERENCE
            elif rule.role == ENGINE_REQUEST:
                got = _INFERENCE
                engines.append(i)
                in_engine[i] = True
            elif rule.role == INVOCATION:  # no stage of its own: rule 5 or 6
                stage[i] = inherited or _OTHER
                continue
            else:
                got = rule.stage or _OTHER
            stage[i] = carried[i] = got
            continue
        if inherited is not None:  # rule 5; else rule 6, other
            stage[i] = inherited
    return stage, hop, engines, followers


def _add_engine_phases(trace: PreparedTrace, engines: list[int]) -> None:
    """Add each engine span's queue/prefill/decode intervals as children, unless spans
    below it already name the phases."""
    spans, stage, parent = trace.spans, trace.stage, trace.parent
    named_below = [False] * len(spans)
    for i in reversed(trace.order):
        p = parent[i]
        if p >= 0 and (named_below[i] or stage[i].startswith(_SUB)):
            named_below[p] = True
    trace.engines = []
    for e in engines:
        if named_below[e]:
            continue
        s = spans[e]
        compute = next((c for c in trace.children[e] if spans[c].name in CHILD_SPANS), -1)
        trace.engines.append((e, compute))
        compute_start = trace.start[compute] if compute >= 0 else None
        for sub, lo, hi in engine_intervals(s, trace.start[e], trace.end[e], compute_start):
            k = len(spans)
            spans.append(phase_span(s, sub, lo, hi))
            parent.append(e)
            if trace.blocking is not None:
                trace.blocking.append(True)
            trace.children.append([])
            trace.children[e].append(k)
            trace.start.append(lo)
            trace.end.append(hi)
            stage.append(sub)
            trace.hop.append(None)
            trace.order.append(k)
            trace.synthetic += 1


def phase_span(engine: Span, sub: str, lo: int, hi: int) -> Span:
    """The span that stands for one phase (``sub``) of an engine request span."""
    return Span(
        engine.trace_id,
        f"{engine.span_id}:{sub}",
        engine.span_id,
        engine.service,
        sub,
        KIND_INTERNAL,
        lo,
        hi,
        sub,
    )  # fmt: skip
