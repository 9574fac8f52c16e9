"""Per-trace breakdown: critical-path time per group, network hops, TTFT and tokens."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeAlias

from tracer import attributes as attrs
from tracer import engines
from tracer.analysis.conventions.phases import coordinator_ttft_ns
from tracer.analysis.model.critical_path import marks, trace_times, ttft_view
from tracer.analysis.model.prepare import PreparedTrace
from tracer.spans._numbers import token_count
from tracer.spans.model import Span

__all__ = [
    "GROUP_BY",
    "TOKEN_COLUMNS",
    "TOKEN_KEYS",
    "TokenPlan",
    "Tokens",
    "TraceBreakdown",
    "break_down",
    "count_planned",
    "count_tokens",
    "group_key",
    "model_calls",
    "token_carriers",
    "token_plan",
]

GROUP_BY = ("stage", "service", "operation")


@dataclass(slots=True)  # not frozen: a frozen dataclass is built ~7x slower, once a trace
class TraceBreakdown:
    """Where one trace's end-to-end time went. Durations in nanoseconds.

    ``groups`` sums exactly to ``e2e_ns``; ``ttft_groups`` (when the trace has a
    first-token point) sums exactly to ``ttft_ns``. ``model_ttft_ns`` is the model
    server's own time to first token (the innermost inference span with a mark);
    ``coordinator_ttft_ns`` the one a prefill/decode coordinator measured (llm-d's P/D
    proxy: prefill, the KV transfer and decode's first token, which the decode engine's
    own TTFT leaves out). ``cached_tokens`` are the prompt tokens read from a prefix
    cache (None: no span says). ``filled`` holds the values of the per-trace columns
    a function of the trace gives (:data:`~tracer.analysis.table.schema.FILLED`), by
    name (None: not worked out).
    """

    trace_id: str
    root_service: str
    root_name: str
    start_ns: int
    e2e_ns: int
    groups: dict[str, int]
    hops: dict[tuple[str, str], int]
    ttft_ns: int | None
    ttft_groups: dict[str, int] | None
    model_ttft_ns: int | None
    input_tokens: int | None
    output_tokens: int | None
    model: str | None
    span_count: int
    cached_tokens: int | None = None
    coordinator_ttft_ns: int | None = None
    filled: dict[str, Any] | None = None


def group_key(trace: PreparedTrace, i: int, group_by: str) -> str:
    """The group of span ``i``: its stage, service or ``service: operation``.

    Derived network time stays ``network`` in every grouping.
    """
    stage = trace.stage[i]
    if group_by == "stage" or stage == attrs.DERIVED_NETWORK:
        return stage
    span = trace.spans[i]
    if group_by == "service":
        return span.service
    return f"{span.service}: {span.name}"


def _sum_groups(trace: PreparedTrace, own: dict[int, int], group_by: str) -> dict[str, int]:
    groups: dict[str, int] = {}
    if group_by == "stage":
        stage = trace.stage
        for i, t in own.items():
            key = stage[i]
            groups[key] = groups.get(key, 0) + t
        return groups
    for i, t in own.items():
        key = group_key(trace, i, group_by)
        groups[key] = groups.get(key, 0) + t
    return groups


def model_calls(trace: PreparedTrace) -> int | None:
    """How many times a request calls a model: its outermost spans of the ``inference``
    stage (an SDK's call, or the model server's span when the call is traced through
    it), as ``whatif --repeat`` and ``--fanout`` count a call; None when it calls none."""
    stage, parent = trace.stage, trace.parent
    calls = 0
    for i, name in enumerate(stage):
        if name == _INFERENCE or name.startswith(_IN_INFERENCE):
            p = parent[i]
            while p >= 0:
                up = stage[p]
                if up == _INFERENCE or up.startswith(_IN_INFERENCE):
                    break  # inside a call counted at its outermost span
                p = parent[p]
            else:
                calls += 1
    return calls or None


_INFERENCE, _IN_INFERENCE = attrs.INFERENCE, attrs.INFERENCE + "."


def client_first_token(
    trace: PreparedTrace, corrected: list[int | None] | None = None
) -> int | None:
    """The client-perceived first-token point: the root's mark, else the earliest mark
    on a span of the root's service. ``corrected`` is :func:`marks` of the trace when
    the caller has it."""
    root = trace.spans[trace.root]
    if corrected is None:
        corrected = marks(trace)
    if corrected[trace.root] is not None:
        return corrected[trace.root]
    found = [
        m
        for s, m in zip(trace.spans, corrected, strict=True)
        if m is not None and s.service == root.service
    ]
    return min(found) if found else None


def token_carriers(trace: PreparedTrace) -> list[int]:
    """The spans whose token counts a trace's totals take, top-down: the innermost
    spans that carry usage, so that an app span and the model server span recording
    the same call are not counted twice."""
    disjoint = _USAGE_SET.isdisjoint
    carriers = [i for i, s in enumerate(trace.spans) if s.attributes and not disjoint(s.attributes)]
    if len(carriers) <= 1:  # the common case: one span, innermost by itself
        return carriers
    n = len(trace.spans)
    carries = [False] * n
    for i in carriers:
        carries[i] = True
    below = [False] * n
    for i in reversed(trace.order):
        p = trace.parent[i]
        if p >= 0 and (carries[i] or below[i]):
            below[p] = True
    return [i for i in trace.order if carries[i] and not below[i]]


#: Input and output tokens, the model, and the cached prompt tokens (None: unknown):
#: the values of the per-trace columns :data:`TOKEN_COLUMNS` names, in that order (a
#: plain tuple: one is made per trace).
Tokens: TypeAlias = tuple[int | None, int | None, str | None, int | None]
#: The columns (:data:`~tracer.analysis.table.schema.ROW`) of a :data:`Tokens`' values.
TOKEN_COLUMNS = ("input_tokens", "output_tokens", "model", "cached_tokens")


def count_tokens(carriers: Iterable[dict[str, Any]]) -> Tokens:
    """Input and output tokens, the model and the cached prompt tokens over the
    attributes of the carriers."""
    tin = tout = 0
    cached: int | None = None
    model = None
    for a in carriers:
        tin += _first_int(a, _INPUT_KEYS)
        tout += _first_int(a, _OUTPUT_KEYS)
        key = next((k for k in _CACHED_KEYS if k in a), None)
        if key is not None:
            cached = (cached or 0) + token_count(a[key])
        if not model:
            for key in _MODEL_KEYS:
                model = a.get(key)
                if model:
                    break
    return tin, tout, str(model) if model else None, cached


#: Which keys ``count_tokens`` reads from one carrier span whose attribute keys are
#: known (a shape's): (span index, first input key present, first output key present,
#: model keys present, first cached-tokens key present).
TokenPlan: TypeAlias = tuple[int, str | None, str | None, tuple[str, ...], str | None]


def token_plan(a: dict[str, Any], i: int) -> TokenPlan:
    """The :data:`TokenPlan` of span ``i`` with attributes ``a``."""
    first_in = next((k for k in _INPUT_KEYS if k in a), None)
    first_out = next((k for k in _OUTPUT_KEYS if k in a), None)
    first_cached = next((k for k in _CACHED_KEYS if k in a), None)
    return i, first_in, first_out, tuple(k for k in _MODEL_KEYS if k in a), first_cached


def count_planned(spans: list[Span], plan: list[TokenPlan]) -> Tokens:
    """:func:`count_tokens` of the carriers, reading the keys the plan names (spans of
    the shape the plan was made for)."""
    tin = tout = 0
    cached: int | None = None
    model = None
    for i, key_in, key_out, model_keys, key_cached in plan:
        a = spans[i].attributes
        if key_in is not None:
            tin += token_count(a.get(key_in))
        if key_out is not None:
            tout += token_count(a.get(key_out))
        if key_cached is not None:
            cached = (cached or 0) + token_count(a.get(key_cached))
        if not model:
            for key in model_keys:
                model = a[key]
                if model:
                    break
    return tin, tout, str(model) if model else None, cached


def _tokens(trace: PreparedTrace) -> Tokens:
    carriers = token_carriers(trace)
    if not carriers:
        return None, None, None, None
    spans = trace.spans
    return count_tokens([spans[i].attributes for i in carriers])


# Token usage and the model under every naming scheme the registry knows (GenAI
# conventions, older OpenLLMetry and vLLM/SGLang, OpenInference), first found first.
_INPUT_KEYS = engines.INPUT_TOKEN_KEYS
_OUTPUT_KEYS = engines.OUTPUT_TOKEN_KEYS
#: Prompt tokens read from a prefix cache.
_CACHED_KEYS = engines.CACHED_TOKEN_KEYS
_USAGE_KEYS = _INPUT_KEYS + _OUTPUT_KEYS
_USAGE_SET = frozenset(_USAGE_KEYS)
_MODEL_KEYS = engines.MODEL_KEYS
#: The attributes whose values the token counts read (:func:`count_planned` reads them
#: per trace, so the batches do not key a shape on them).
TOKEN_KEYS = frozenset(_USAGE_KEYS + _MODEL_KEYS + _CACHED_KEYS)


def _first_int(a: dict[str, object], keys: tuple[str, ...]) -> int:
    for key in keys:
        if key in a:
            return token_count(a[key])
    return 0


def break_down(trace: PreparedTrace, group_by: str = "stage") -> TraceBreakdown:
    """Attribute ``trace`` along its critical path, grouped by ``group_by``."""
    own = trace_times(trace)
    groups = _sum_groups(trace, own, group_by)
    hops: dict[tuple[str, str], int] = {}
    hop_of = trace.hop
    for i, t in own.items():
        hop = hop_of[i]
        if hop is not None:
            hops[hop] = hops.get(hop, 0) + t
    root_start = trace.start[trace.root]
    ttft_ns = ttft_groups = model_ttft = None
    corrected = marks(trace)
    point = client_first_token(trace, corrected)
    if point is not None and root_start < point:
        point = min(point, trace.end[trace.root])
        ends, included = ttft_view(trace, point, corrected)
        t_own = trace_times(trace, ends, included)
        ttft_groups = _sum_groups(trace, t_own, group_by)
        ttft_ns = point - root_start
    inner = None
    spans, stage = trace.spans, trace.stage
    for i in trace.order:
        if spans[i].first_token_ns is not None and stage[i] == "inference":
            inner = i  # the last in top-down order: the innermost
    if inner is not None:
        s = trace.spans[inner]
        model_ttft = max(s.first_token_ns - s.start_ns, 0)  # type: ignore[operator]
    tin, tout, model, cached = _tokens(trace)
    coordinator = None
    if trace.coordinator >= 0:
        coordinator = coordinator_ttft_ns(trace.spans[trace.coordinator])
    root = trace.spans[trace.root]
    return TraceBreakdown(
        trace_id=trace.trace_id,
        root_service=root.service,
        root_name=root.name,
        start_ns=root_start,
        e2e_ns=trace.e2e_ns,
        groups=groups,
        hops=hops,
        ttft_ns=ttft_ns,
        ttft_groups=ttft_groups,
        model_ttft_ns=model_ttft,
        input_tokens=tin,
        output_tokens=tout,
        model=model,
        span_count=len(trace.spans) - trace.synthetic,
        cached_tokens=cached,
        coordinator_ttft_ns=coordinator,
    )
