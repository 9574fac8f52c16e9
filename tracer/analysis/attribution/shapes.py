"""What the batches learn from one trace: the scalar path's decisions, and what they read.

A shape's decisions (the root, the tree, each span's stage and hop, the engine phases,
which spans carry tokens, the groups) are the scalar path's own: :func:`learn` runs
:func:`~tracer.analysis.model.prepare.prepare` and
:func:`~tracer.analysis.model.breakdown.break_down` on the first trace of a shape and keeps
what they decided. It runs them on spans whose attributes note every value the
decisions read, so the key that later traces must match is derived from what the
decisions read, not written beside them:

- every field of a span is in :data:`FIELDS`, which says how the batches treat it: in
  the key by value (service, name, kind, stage: every trace's stage resolution reads
  them), in the key when a decision read it (status), the tree (ids), a column the
  batch reads per trace (times, marks), or read per trace for the trace's weight only
  (the trace state, by :func:`~tracer.analysis.sampling.weights.trace_weight`, the function the
  scalar path calls: a shape whose decisions read it is left to the scalar path); a
  test checks that ``Span`` has no other field, so a new one cannot be left out;
- an attribute's presence is in the key; its value is in the key when a decision read
  it, unless the batch reads it per trace through the same function the scalar path
  calls (token counts, :data:`~tracer.analysis.model.breakdown.TOKEN_KEYS`; engine phases,
  :data:`~tracer.analysis.conventions.phases.PHASE_KEYS`; a P/D coordinator's own time to first
  token, :data:`~tracer.analysis.conventions.phases.COORDINATOR_KEYS`).

The per-trace columns a function of the trace gives (the schema's ``fill``,
:data:`~tracer.analysis.table.schema.FILLED`) are worked out once, on the trace a shape
is learned on, from spans that note everything the function reads: the attribute
values and statuses it read join the key (token counts and phases too: the batch does
not read them for it), and a function that read a time, an id or the trace state
leaves the shape to the scalar path, since those differ from trace to trace.

A trace of the same key makes the same decisions: the scalar path is deterministic,
and it read nothing else that could send it another way. The times that steer it are
left out of the batches: one root only, a CLIENT span with one remote child, clocks to
shift (given back to the scalar path).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias

import numpy as np

from tracer.analysis.conventions.phases import COORDINATOR_KEYS, PHASE_KEYS, engine_intervals
from tracer.analysis.model.breakdown import (
    TOKEN_KEYS,
    TokenPlan,
    break_down,
    group_key,
    token_carriers,
    token_plan,
)
from tracer.analysis.model.prepare import PreparedTrace, StageMap, prepare
from tracer.analysis.sampling.weights import SAMPLING_KEYS
from tracer.analysis.table.schema import FILLED, filled
from tracer.spans.model import KIND_CLIENT, KIND_CONSUMER, KIND_PRODUCER, Span, Warnings

__all__ = [
    "FIELDS",
    "PER_TRACE",
    "QUEUED",
    "SCALAR",
    "ByPhases",
    "ByValues",
    "Learned",
    "Shape",
    "Slot",
    "learn",
    "phases_of",
    "values_at",
]

#: How the batches treat each field of a span.
FIELDS: dict[str, Literal["key", "read", "tree", "column", "attributes", "trace", "weight"]] = {
    "trace_id": "trace",  # the trace's own id
    "span_id": "tree",  # the parents in the key
    "parent_id": "tree",
    "service": "key",
    "name": "key",
    "kind": "key",
    "stage": "key",
    "status": "read",
    "start_ns": "column",
    "end_ns": "column",
    "first_token_ns": "column",
    "attributes": "attributes",  # keys in the key; values as the module docstring says
    # read per trace by weights.trace_weight, the function the scalar path calls (a
    # sampler's threshold); a shape whose decisions read it takes the scalar path
    "trace_state": "weight",
}
#: The attributes whose values the batch reads per trace, as the scalar path does.
PER_TRACE = TOKEN_KEYS | PHASE_KEYS | COORDINATOR_KEYS
#: What a shape queues of each trace until its batch runs, a list each by name: the
#: trace's id, its place in the input (``seq``, ``last_end``), its ``--split-by`` value,
#: its token counts (``breakdown.Tokens``), its weight and whether that is known
#: (``weights.trace_weight``), its P/D coordinator's own time to first token, and its
#: spans (None: not kept).
QUEUED = (
    "trace_id",
    "seq",
    "last_end",
    "split",
    "tokens",
    "weights",
    "coordinator_ttft_ns",
    "spans",
)
#: Spans of the largest trace taken (bigger ones are rare and take the scalar path).
MAX_SPANS = 512
#: Children of one span taken: the batch walk compares every pair of siblings (a
#: wider fan-out is rare and takes the scalar path).
MAX_KIDS = 64
#: A shape the batches do not take.
SCALAR: Any = object()


@dataclass
class Shape:
    """What the scalar path decided for a trace of this shape, and the traces queued.

    Spans ``spans_in`` and on are the engine phases the scalar path adds (one per
    interval the trace's engine spans report); ``phases`` names each one's engine span
    and sub-stage."""

    n: int
    spans_in: int
    root: int
    order: list[int]
    parent: list[int]
    children: list[list[int]]
    #: each span's children that hold it up (the walks' tree)
    kids: list[list[int]]
    #: (parent, its remote children, parent is CLIENT, per child: exempt from the skew
    #: check (messaging, or on its parent's host)) in the order the scalar clock
    #: correction visits them
    edges: list[tuple[int, list[int], bool, list[bool]]]
    group_of: np.ndarray  # (spans,) group column of each span
    groups: list[str]
    hop_of: np.ndarray  # (spans,) hop column of each span, -1 for none
    hops: list[tuple[str, str]]
    same_service: list[int]  # spans of the root's service (client first token)
    inference: list[int]  # spans whose stage is inference, top-down
    #: innermost spans with token counts, top-down: the keys count_planned reads
    carriers: list[TokenPlan]
    root_service: str
    root_name: str
    #: each span's resolved stage and network hop (``PreparedTrace.stage``, ``.hop``)
    stage: list[str]
    hop: list[tuple[str, str] | None]
    blocking: list[bool] | None
    #: (parent, child) of each remote edge the clock check reads
    nested: list[tuple[int, int]]
    phases: list[tuple[int, str]]
    #: the root carries a sampler's attribute (the attribute keys are in the key)
    sampled: bool = False
    #: the P/D coordinator span whose own time to first token is read per trace, or -1
    coordinator: int = -1
    #: the values of the columns a function of the trace gives (the same for every
    #: trace of the shape), by name
    filled: dict[str, Any] = field(default_factory=dict)
    #: the queued traces' values by name, a list each (:data:`QUEUED`)
    queue: dict[str, list] = field(default_factory=lambda: {k: [] for k in QUEUED})
    #: per trace: its spans' starts, ends and marks (0: none), as int64 (``words.shape_words``)
    times: bytearray = field(default_factory=bytearray)
    has: bytearray = field(default_factory=bytearray)  # per span: it has a mark


@dataclass
class ByValues:
    """Shapes told apart by attribute values the decisions read: the (span, key)
    slots, and a shape (or a :class:`ByPhases`) per tuple of their values."""

    slots: list[Slot]
    shapes: dict[tuple[str, ...], Any] = field(default_factory=dict)


@dataclass
class ByPhases:
    """Shapes told apart by the phases their engine spans report: the engine spans
    (with the ``compute`` child each reads, -1: none), and a shape per tuple of phase
    names."""

    engines: list[tuple[int, int]]
    shapes: dict[tuple[str, ...], Any] = field(default_factory=dict)


#: What a decision read of span ``i``: a field (``"status"``, key ``""``) or an
#: attribute (``"attributes"``, its key).
Slot: TypeAlias = tuple[int, str, str]
#: A learned shape, the value slots its decisions read, and its engine spans.
Learned: TypeAlias = tuple[Shape, list[Slot], list[tuple[int, int]]]
_READ = frozenset(name for name, how in FIELDS.items() if how in ("read", "weight"))
#: The fields only the weight reads: a decision that reads one makes the shape scalar.
_WEIGHT_FIELDS = frozenset((name, "") for name, how in FIELDS.items() if how == "weight")


def values_at(slots: list[Slot], spans: list[Span]) -> tuple[str, ...]:
    """The values at ``slots``, told apart by type (``repr``)."""
    return tuple(
        [
            repr(spans[i].attributes.get(k) if f == "attributes" else getattr(spans[i], f))
            for i, f, k in slots
        ]
    )


def phases_of(engines: list[tuple[int, int]], spans: list[Span]) -> list[tuple[str, int, int]]:
    """The phases the scalar path adds for these engine spans, on the spans' own times
    (a trace whose clocks move them is given back to the scalar path)."""
    out: list[tuple[str, int, int]] = []
    for e, compute in engines:
        s = spans[e]
        at = spans[compute].start_ns if compute >= 0 else None
        out.extend(engine_intervals(s, s.start_ns, s.end_ns, at))
    return out


class _ReadingSpan(Span):
    """A span that notes which of the fields in the key only when read are read."""

    _noted = _READ

    def __getattribute__(self, name: str) -> Any:
        if name in object.__getattribute__(self, "_noted"):
            object.__getattribute__(self, "attributes")._read.add((name, ""))
        return object.__getattribute__(self, name)


class _FillingSpan(_ReadingSpan):
    """A span that notes every field read (a ``fill`` function's reads)."""

    _noted = frozenset(name for name in FIELDS if name != "attributes")


class _Times(list):
    """A prepared trace's starts or ends that note that they were read."""

    def __init__(self, values: list[int], read: set[tuple[str, str]]) -> None:
        super().__init__(values)
        self._read = read

    def __getitem__(self, i: Any) -> Any:
        self._read.add(("start_ns", ""))
        return list.__getitem__(self, i)

    def __iter__(self) -> Any:
        self._read.add(("start_ns", ""))
        return list.__iter__(self)


def _filled(trace: PreparedTrace, spans_in: int) -> tuple[dict[str, Any], list[Slot]] | None:
    """The values of the :data:`~tracer.analysis.table.schema.FILLED` columns for the
    trace a shape is learned on, and the slots their functions read (None: one read
    what differs from trace to trace: a time, an id, the trace state)."""
    read: list[set[tuple[str, str]]] = [set() for _ in trace.spans]
    spans: list[Span] = []
    for s, r in zip(trace.spans, read, strict=True):
        plain = {f: object.__getattribute__(s, f) for f in FIELDS if f != "attributes"}
        attributes = object.__getattribute__(s, "attributes")
        spans.append(_FillingSpan(**plain, attributes=_Reading(dict(dict.items(attributes)), r)))
    times: set[tuple[str, str]] = set()
    values = filled(
        replace(trace, spans=spans, start=_Times(trace.start, times), end=_Times(trace.end, times))
    )
    if times:
        return None
    slots: list[Slot] = []
    for i, keys in enumerate(read):
        for f, k in keys:
            how = FIELDS[f]
            if how not in ("key", "read", "attributes"):
                return None
            if i < spans_in and how != "key":  # (the phases' spans have neither)
                slots.append((i, f, k))
    return values, slots


class _Reading(dict):
    """A span's attributes that note the keys whose values are read."""

    __slots__ = ("_read",)

    def __init__(self, attributes: dict[str, Any], read: set[tuple[str, str]]) -> None:
        super().__init__(attributes)
        self._read = read

    def __getitem__(self, key: str) -> Any:
        self._read.add(("attributes", key))
        return dict.__getitem__(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        self._read.add(("attributes", key))
        return dict.get(self, key, default)

    def __iter__(self) -> Any:  # also makes dict(a) and {**a} read through __getitem__
        return dict.__iter__(self)

    def _all(self) -> None:
        self._read.update(("attributes", k) for k in dict.keys(self))

    def items(self) -> Any:
        self._all()
        return dict.items(self)

    def values(self) -> Any:
        self._all()
        return dict.values(self)

    def copy(self) -> dict[str, Any]:
        self._all()
        return dict(dict.items(self))

    def __repr__(self) -> str:
        self._all()
        return dict.__repr__(self)

    def pop(self, key: str, *default: Any) -> Any:
        self._read.add(("attributes", key))
        return dict.pop(self, key, *default)


def learn(
    trace_id: str, spans: list[Span], group_by: str, stage_map: StageMap | None
) -> Learned | Any | None:
    """The shape of this trace from the scalar path's own decisions (and what they
    read); :data:`SCALAR` for a shape the batches cannot take, None to decide on a
    later trace (this one's clocks must be corrected)."""
    read: list[set[tuple[str, str]]] = [set() for _ in spans]
    reading: list[Span] = [
        _ReadingSpan(
            **{f: getattr(s, f) for f in FIELDS if f != "attributes"},
            attributes=_Reading(s.attributes, r),
        )
        for s, r in zip(spans, read, strict=True)
    ]
    issues = Warnings()
    trace = prepare(trace_id, reading, issues, stage_map)
    if trace is None or len(trace.order) - trace.synthetic != len(spans):
        return SCALAR  # a cycle: decided by the shape
    if issues.any:
        return None  # clock skew in this trace: times, not the shape
    break_down(trace, group_by)  # what the row's decisions read, too
    if any(not _WEIGHT_FIELDS.isdisjoint(r) for r in read):
        return SCALAR  # a decision read what the batches read only for the weight
    n = len(trace.spans)
    engines = trace.engines or []
    if any(spans[e].kind == KIND_CLIENT for e, _ in engines):
        return SCALAR  # its phases would read its widened end
    if max(map(len, trace.children)) > MAX_KIDS:
        return SCALAR
    edges = []
    for p in trace.order:
        remote = [c for c in trace.children[p] if trace.spans[c].service != trace.spans[p].service]
        if not remote:
            continue
        client = trace.spans[p].kind == KIND_CLIENT
        if client and len(remote) > 1:
            return SCALAR  # its hop goes to the longest callee: decided by times
        exempt = [
            trace.spans[p].kind == KIND_PRODUCER
            or trace.spans[c].kind == KIND_CONSUMER
            or c in trace.one_clock
            for c in remote
        ]
        edges.append((p, remote, client, exempt))
    groups: list[str] = []
    group_of = np.empty(n, np.int64)
    for i in range(n):
        name = group_key(trace, i, group_by)
        if name not in groups:
            groups.append(name)
        group_of[i] = groups.index(name)
    hops: list[tuple[str, str]] = []
    hop_of = np.full(n, -1, np.int64)
    for i, hop in enumerate(trace.hop):
        if hop is not None:
            if hop not in hops:
                hops.append(hop)
            hop_of[i] = hops.index(hop)
    root = trace.root
    carriers = [token_plan(trace.spans[i].attributes, i) for i in token_carriers(trace)]
    values: dict[str, Any] = {}
    slots = [
        (i, f, k)
        for i, keys in enumerate(read)
        for f, k in keys
        if not (f == "attributes" and k in PER_TRACE)
    ]
    if FILLED:
        got = _filled(trace, len(spans))
        if got is None:
            return SCALAR  # a column's value differs from trace to trace of this shape
        values, more = got
        slots = list(set(slots) | set(more))
    slots.sort()
    shape = Shape(
        n=n,
        spans_in=len(spans),
        root=root,
        order=list(trace.order),
        parent=list(trace.parent),
        children=[list(c) for c in trace.children],
        kids=[
            [c for c in kids if trace.blocking is None or trace.blocking[c]]
            for kids in trace.children
        ],
        edges=edges,
        group_of=group_of,
        groups=groups,
        hop_of=hop_of,
        hops=hops,
        same_service=[i for i in range(n) if trace.spans[i].service == spans[root].service],
        inference=[i for i in trace.order if trace.stage[i] == "inference"],
        carriers=carriers,
        root_service=spans[root].service,
        root_name=spans[root].name,
        stage=list(trace.stage),
        hop=list(trace.hop),
        blocking=trace.blocking,
        sampled=not SAMPLING_KEYS.isdisjoint(spans[root].attributes),
        coordinator=trace.coordinator,
        nested=[
            (p, c)
            for p, remote, _, exempt in edges
            for c, skip in zip(remote, exempt, strict=True)
            if not skip
        ],
        phases=[(trace.parent[k], trace.stage[k]) for k in range(len(spans), n)],
        filled=values,
    )
    return shape, slots, engines
