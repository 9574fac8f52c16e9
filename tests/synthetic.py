"""Synthetic seven-stage traces and writers, for tests, benchmarks and examples.

:func:`chain_trace` lays out the demo chain (client -> gateway -> app -> model) with
the given milliseconds per stage and per network hop, so expected numbers are known
exactly. :func:`to_otlp_json` and :func:`to_jaeger_json` write spans in the two file
formats the analyzer reads.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable
from typing import Any

from opentelemetry.sdk.trace.id_generator import IdGenerator

from tracer import attributes as attrs
from tracer.spans.model import KIND_CLIENT, KIND_INTERNAL, KIND_SERVER, Span

__all__ = ["SEED_MS", "chain_trace", "mixed_traces", "to_jaeger_json", "to_otlp_json"]

MS = 1_000_000
#: The demo's story: 600 ms outside the model, 1000 ms of inference.
SEED_MS = {
    "client": 60.0,
    "net_client_gateway": 120.0,
    "gateway": 80.0,
    "auth": 90.0,
    "net_gateway_app": 40.0,
    "context": 100.0,
    "net_app_model": 20.0,
    "inference": 1000.0,
    "postprocess": 50.0,
    "return": 40.0,
}
_counter = itertools.count(1)


class SeededIds(IdGenerator):
    """The OpenTelemetry SDK's id generator with its random draws seeded, so a test
    that samples traces by their ids keeps the same ones on every run (the SDK's own
    ids would make its counts, and their intervals, vary from run to run). It records
    the trace ids it gave."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)
        self.trace_ids: list[int] = []

    def generate_span_id(self) -> int:
        return self._rng.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        trace_id = self._rng.getrandbits(128) or 1
        self.trace_ids.append(trace_id)
        return trace_id


def _id() -> str:
    return format(next(_counter), "016x")


def chain_trace(
    trace_id: str,
    start_ns: int,
    ms: dict[str, float] | None = None,
    *,
    model_ttft_ms: float | None = None,
    tokens: tuple[int, int] | None = None,
    model: str = "sim-1",
    engine_ms: tuple[float, float, float] | None = None,
    trace_state: str | None = None,
) -> list[Span]:
    """One trace of the seven-stage chain; its stage times are exactly ``ms``.

    Args:
        trace_id: 32 hex digits.
        start_ns: the root's start.
        ms: milliseconds per stage and hop (keys of :data:`SEED_MS`; missing ones are 0).
        model_ttft_ms: when set, the model server, the app and the client get first-token
            marks (the model's after this many ms of its own time).
        tokens: (input, output) usage on the model server span.
        model: ``gen_ai.request.model``.
        engine_ms: (queue, prefill, decode) ms that the model server span reports as
            vLLM does (``gen_ai.latency.*``, seconds; the time to first token is queue
            plus prefill from the span's start).
        trace_state: the W3C trace state every span carries (a sampler's
            ``ot=th:...``).
    """
    d = {k: 0.0 for k in SEED_MS}
    d.update(ms or SEED_MS)
    ns = {k: int(round(v * MS)) for k, v in d.items()}
    spans: list[Span] = []

    def add(
        parent: Span | None,
        service: str,
        name: str,
        kind: int,
        start: int,
        end: int,
        stage: str | None,
        **attributes: Any,
    ) -> Span:
        if stage is not None:
            attributes[attrs.STAGE] = stage
        span = Span(
            trace_id,
            _id(),
            parent.span_id if parent else None,
            service,
            name,
            kind,
            start,
            end,
            stage,
            0,
            None,
            attributes,
            trace_state,
        )
        spans.append(span)
        return span

    total = sum(ns.values())
    t0 = start_ns
    root = add(None, "client", "chat request", KIND_INTERNAL, t0, t0 + total, "client")
    c_half = ns["client"] // 2
    n1 = ns["net_client_gateway"] // 2
    g_half = ns["gateway"] // 2
    n2 = ns["net_gateway_app"] // 2
    n3 = ns["net_app_model"] // 2
    cg = add(
        root,
        "client",
        "POST",
        KIND_CLIENT,
        t0 + c_half,
        root.end_ns - (ns["client"] - c_half),
        None,
    )
    gw = add(
        cg,
        "gateway",
        "POST /v1/chat/completions",
        KIND_SERVER,
        cg.start_ns + n1,
        cg.end_ns - (ns["net_client_gateway"] - n1),
        "gateway",
    )
    t = gw.start_ns + g_half
    auth = add(gw, "gateway", "verify_key", KIND_INTERNAL, t, t + ns["auth"], "auth")
    ga = add(
        gw, "gateway", "POST", KIND_CLIENT, auth.end_ns, gw.end_ns - (ns["gateway"] - g_half), None
    )
    app = add(
        ga,
        "app",
        "POST /generate",
        KIND_SERVER,
        ga.start_ns + n2,
        ga.end_ns - (ns["net_gateway_app"] - n2),
        "return",
    )
    ctx = add(
        app,
        "app",
        "build_context",
        KIND_INTERNAL,
        app.start_ns,
        app.start_ns + ns["context"],
        "context",
    )
    inf_len = ns["net_app_model"] + ns["inference"]
    inf = add(
        app,
        "app",
        f"chat {model}",
        KIND_INTERNAL,
        ctx.end_ns,
        ctx.end_ns + inf_len,
        "inference",
        **{attrs.GEN_AI_OPERATION_NAME: "chat", attrs.GEN_AI_REQUEST_MODEL: model},
    )
    am = add(inf, "app", "POST", KIND_CLIENT, inf.start_ns, inf.end_ns, None)
    extra: dict[str, Any] = {attrs.GEN_AI_REQUEST_MODEL: model}
    if tokens is not None:
        extra[attrs.GEN_AI_INPUT_TOKENS] = tokens[0]
        extra[attrs.GEN_AI_OUTPUT_TOKENS] = tokens[1]
    if engine_ms is not None:
        queue, prefill, decode = engine_ms
        extra[attrs.GEN_AI_LATENCY_TTFT] = (queue + prefill) / 1000
        extra[attrs.GEN_AI_LATENCY_QUEUE] = queue / 1000
        extra[attrs.GEN_AI_LATENCY_PREFILL] = prefill / 1000
        extra[attrs.GEN_AI_LATENCY_DECODE] = decode / 1000
    mdl = add(
        am,
        "model",
        "POST /v1/chat/completions",
        KIND_SERVER,
        am.start_ns + n3,
        am.end_ns - (ns["net_app_model"] - n3),
        None,
        **extra,
    )
    add(
        app,
        "app",
        "postprocess",
        KIND_INTERNAL,
        inf.end_ns,
        inf.end_ns + ns["postprocess"],
        "postprocess",
    )
    if model_ttft_ms is not None:
        mark = mdl.start_ns + int(round(model_ttft_ms * MS))
        for span in (mdl, am, inf, app, ga, gw, cg, root):
            span.first_token_ns = mark
        # Each hop back adds its share of the return trip.
        root.first_token_ns = mark + (n1 + n2 + n3)
    return spans


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        v: dict[str, Any] = {"boolValue": value}
    elif isinstance(value, int):
        v = {"intValue": str(value)}
    elif isinstance(value, float):
        v = {"doubleValue": value}
    else:
        v = {"stringValue": str(value)}
    return {"key": key, "value": v}


def _otlp_span(s: Span) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": s.trace_id,
        "spanId": s.span_id,
        "name": s.name,
        "kind": s.kind,
        "startTimeUnixNano": str(s.start_ns),
        "endTimeUnixNano": str(s.end_ns),
        "attributes": [_attr(k, v) for k, v in s.attributes.items()],
        "status": {"code": s.status},
    }
    if s.parent_id:
        out["parentSpanId"] = s.parent_id
    if s.trace_state:
        out["traceState"] = s.trace_state
    if s.first_token_ns is not None:
        out["events"] = [{"name": attrs.FIRST_TOKEN_EVENT, "timeUnixNano": str(s.first_token_ns)}]
    return out


def to_otlp_json(spans: Iterable[Span]) -> dict[str, Any]:
    """One OTLP JSON ``{"resourceSpans": [...]}`` object, one resource per service."""
    by_service: dict[str, list[dict[str, Any]]] = {}
    for s in spans:
        by_service.setdefault(s.service, []).append(_otlp_span(s))
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [_attr(attrs.SERVICE_NAME, service)]},
                "scopeSpans": [{"scope": {"name": "hoptrace"}, "spans": items}],
            }
            for service, items in by_service.items()
        ]
    }


_KIND_TAG = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


def to_jaeger_json(spans: Iterable[Span]) -> dict[str, Any]:
    """Jaeger v1 query-API JSON ``{"data": [trace, ...]}``."""
    traces: dict[str, dict[str, Any]] = {}
    for s in spans:
        trace = traces.setdefault(s.trace_id, {"traceID": s.trace_id, "spans": [], "processes": {}})
        pid = next(
            (p for p, v in trace["processes"].items() if v["serviceName"] == s.service), None
        )
        if pid is None:
            pid = f"p{len(trace['processes']) + 1}"
            trace["processes"][pid] = {"serviceName": s.service, "tags": []}
        tags = [{"key": k, "type": "string", "value": v} for k, v in s.attributes.items()]
        if s.kind in _KIND_TAG:
            tags.append(
                {"key": attrs.JAEGER_SPAN_KIND, "type": "string", "value": _KIND_TAG[s.kind]}
            )
        if s.trace_state:
            tags.append({"key": attrs.JAEGER_TRACE_STATE, "type": "string", "value": s.trace_state})
        logs = []
        if s.first_token_ns is not None:
            logs.append(
                {
                    "timestamp": s.first_token_ns // 1000,
                    "fields": [
                        {"key": "event", "type": "string", "value": attrs.FIRST_TOKEN_EVENT}
                    ],
                }
            )
        trace["spans"].append(
            {
                "traceID": s.trace_id,
                "spanID": s.span_id,
                "operationName": s.name,
                "references": [
                    {"refType": "CHILD_OF", "traceID": s.trace_id, "spanID": s.parent_id}
                ]
                if s.parent_id
                else [],
                "startTime": s.start_ns // 1000,
                "duration": (s.end_ns - s.start_ns) // 1000,
                "tags": tags,
                "logs": logs,
                "processID": pid,
            }
        )
    return {"data": list(traces.values())}


def mixed_traces(count: int, seed: int = 3) -> list[list[Span]]:
    """``count`` traces of the chain with what exporters write of LLM calls, varied:
    timings within 0.6-1.6x of :data:`SEED_MS`, a first-token mark on every second trace,
    token counts on two in three, engine latencies on one in four, an error status on one
    span of one in five (the decoders' and the fuzzer's everyday lines)."""
    rng = random.Random(seed)
    traces = []
    for i in range(count):
        ms = {k: v * rng.uniform(0.6, 1.6) for k, v in SEED_MS.items()}
        trace = chain_trace(
            f"{i + 1:032x}",
            1_750_000_000_000_000_000 + i * 7_000_000,
            ms,
            model_ttft_ms=ms["inference"] * 0.2 if i % 2 else None,
            tokens=(600 + i, 120 + i) if i % 3 else None,
            engine_ms=(1.0 + i, 5.0, 30.0) if i % 4 == 0 else None,
        )
        if i % 5 == 0:
            trace[rng.randrange(len(trace))].status = 2
        traces.append(trace)
    return traces
