"""The real third-party openai instrumentations against the running demo chain.

OpenLLMetry (``opentelemetry-instrumentation-openai``), OpenInference
(``openinference-instrumentation-openai``) and the OpenTelemetry contrib
``opentelemetry-instrumentation-openai-v2`` each trace the openai SDK in a process of
their own (``_client.py``: their patches and the global provider are process-wide),
with ``opentelemetry-instrumentation-httpx`` on the ``httpx.Client`` handed to the SDK
so the trace context reaches the gateway. Nothing in the client process is hoptrace:
the traces reach hoptrace only as OTLP, like any user's.

What must hold: the client's own time is ``client``, ``other`` is 0%, the httpx CLIENT
span is the ``llm-client -> gateway`` network hop, the client TTFT hoptrace reports is
within a few ms of the first content chunk the client itself timed (OpenLLMetry and
OpenInference record a first-chunk mark; openai-v2 records none, and hoptrace claims
no client TTFT from it), and the span store holds no prompt text afterwards.

The demo chain streams no role-only chunk: its first SSE chunk carries content
(``demo_app/app.py``, ``events``), so the libraries' first-chunk marks are the first
content chunk here. ``_client.py`` checks this per request.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from demo_app.chain import Chain
from tests.helpers import eventually
from tracer.analysis import TraceSet, analyze, load, prepare
from tracer.spans.model import KIND_CLIENT, Span, Warnings

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CLIENT_SCRIPT = HERE / "_client.py"
LIBS = ("openllmetry", "openinference", "openai-v2")
WITH_FIRST_CHUNK_MARK = ("openllmetry", "openinference")
REQUESTS = 6
SERVICE = "llm-client"
SERVICES = {SERVICE, "gateway", "app", "model"}
CHAIN_STAGES = {"gateway", "auth", "context", "inference", "postprocess", "return"}
# hoptrace's client TTFT vs the first content chunk the client timed itself.
TTFT_TOLERANCE_MS = 15.0
CANARY = b"PROMPT-CANARY"


class Run:
    """One library's client process: its requests (as the client timed them) and the
    store's complete traces of them."""

    def __init__(self, lib: str, requests: list[dict[str, Any]], summary: dict[str, Any]):
        self.lib = lib
        self.requests = requests
        self.summary = summary
        self.trace_ids = [r["trace_id"] for r in requests]
        self.traces: dict[str, list[Span]] = {}

    def traceset(self) -> TraceSet:
        return TraceSet({t: list(self.traces[t]) for t in self.trace_ids})


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    folder = tmp_path_factory.mktemp("thirdparty")
    with Chain(folder / "spans.db", profile="loopback") as running:
        yield running


def _complete(spans: list[Span]) -> bool:
    """Every service's spans of one streamed request are in the store."""
    if {s.service for s in spans} < SERVICES:
        return False
    if not {s.stage for s in spans} >= CHAIN_STAGES:
        return False
    mine = [s for s in spans if s.service == SERVICE]
    clients = {s.service for s in spans if s.kind == KIND_CLIENT}
    return len(mine) == 2 and clients >= {SERVICE, "gateway", "app"}


def _run_client(chain: Chain, lib: str) -> Run:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OTEL_EXPORTER_OTLP", "OTEL_SERVICE_NAME", "OTEL_RESOURCE"))
    }
    # openai-v2 records no content by default; make it record the prompt on its span so
    # the store check below sees every library's content arrive and get dropped.
    env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
    cmd = [
        sys.executable,
        str(CLIENT_SCRIPT),
        lib,
        chain.base_url,
        chain.api_key,
        chain.collector.endpoint,
        f"thirdparty-{lib}",
        "--requests",
        str(REQUESTS),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    assert proc.returncode == 0, f"{lib} client failed:\n{proc.stderr[-4000:]}"
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    requests = [line for line in lines if "i" in line]
    summary = next(line["summary"] for line in lines if "summary" in line)
    assert len(requests) == REQUESTS, proc.stdout
    for r in requests:
        assert r["trace_id"], f"{lib} request {r['i']}: one root span expected, got {r['roots']}"
        assert r["text"] and r["first_content_ns"], f"{lib} request {r['i']} streamed no content"
    assert len(set(r["trace_id"] for r in requests)) == REQUESTS
    run = Run(lib, requests, summary)
    store = chain.collector.store.path

    def probe() -> dict[str, list[Span]]:
        traces = load([store]).traces
        return {t: traces[t] for t in run.trace_ids if t in traces}

    have = eventually(
        probe,
        lambda h: len(h) == REQUESTS and all(_complete(s) for s in h.values()),
        deadline_s=30.0,
    )
    missing = [t for t in run.trace_ids if t not in have or not _complete(have[t])]
    assert not missing, f"{lib}: {len(missing)} traces incomplete in the store after 30 s"
    run.traces = have
    return run


@pytest.fixture(scope="module")
def runs(chain: Chain) -> Callable[[str], Run]:
    """``runs(lib)``: that library's client run, made once per module."""
    done: dict[str, Run] = {}

    def get(lib: str) -> Run:
        if lib not in done:
            done[lib] = _run_client(chain, lib)
        return done[lib]

    return get


def _root(spans: list[Span]) -> Span:
    roots = [s for s in spans if s.parent_id is None]
    assert len(roots) == 1, [(s.service, s.name) for s in roots]
    return roots[0]


@pytest.mark.parametrize("lib", LIBS)
def test_client_time_is_client_and_other_is_zero_with_each_instrumentation(runs, lib):
    run = runs(lib)
    result = analyze(run.traceset())
    assert result.traces == REQUESTS
    shares = {g.name: g.share for g in result.groups}
    assert shares.get("client", 0.0) > 0.0, shares
    assert shares.get("other", 0.0) == 0.0, shares
    assert sum(shares.values()) == pytest.approx(1.0)
    for tid in run.trace_ids:
        trace = prepare(tid, run.traces[tid], Warnings())
        assert trace is not None
        root = trace.spans[trace.root]
        # The library's LLM span is the root, in the client's service, and its own
        # time is the caller's SDK time.
        assert root.service == SERVICE
        assert trace.stage[trace.root] == "client", (root.name, trace.stage[trace.root])
        assert "other" not in trace.stage
    print(f"{lib}: shares " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(shares.items())))


@pytest.mark.parametrize("lib", LIBS)
def test_httpx_client_span_is_the_client_to_gateway_hop_with_each_instrumentation(runs, lib):
    run = runs(lib)
    for tid in run.trace_ids:
        spans = run.traces[tid]
        root = _root(spans)
        posts = [
            s for s in spans if s.service == SERVICE and s.kind == KIND_CLIENT and s is not root
        ]
        assert len(posts) == 1, [(s.name, s.kind) for s in spans if s.service == SERVICE]
        post = posts[0]
        assert post.parent_id == root.span_id
        # The traceparent the gateway got points at the httpx span.
        servers = [s for s in spans if s.service == "gateway" and s.parent_id == post.span_id]
        assert servers, "the gateway's server span is not a child of the httpx span"
        trace = prepare(tid, spans, Warnings())
        assert trace is not None
        i = trace.spans.index(post)
        assert trace.stage[i] == "network"
        assert trace.hop[i] == (SERVICE, "gateway")
    result = analyze(run.traceset())
    hops = {(h.source, h.target): h for h in result.hops}
    assert (SERVICE, "gateway") in hops, list(hops)
    assert hops[(SERVICE, "gateway")].n == REQUESTS
    assert hops[(SERVICE, "gateway")].mean_ms > 0.0


@pytest.mark.parametrize("lib", WITH_FIRST_CHUNK_MARK)
def test_client_ttft_matches_first_content_chunk_with_first_chunk_mark(runs, lib):
    run = runs(lib)
    result = analyze(run.traceset())
    assert result.ttft is not None and result.ttft.n == REQUESTS
    by_id = {b.trace_id: b for b in result.breakdowns}
    diffs = []
    for r in run.requests:
        # The chain's first SSE chunk carries content (no role-only chunk), which the
        # libraries' first-chunk marks rely on here.
        first = r["chunks"][0]
        assert first["content"] and first["t_ns"] == r["first_content_ns"], r["chunks"][:2]
        b = by_id[r["trace_id"]]
        root = _root(run.traces[r["trace_id"]])
        assert b.start_ns == root.start_ns
        assert root.first_token_ns is not None, f"{lib}: the LLM span has no first-chunk mark"
        measured_ns = r["first_content_ns"] - root.start_ns
        assert b.ttft_ns is not None
        diffs.append((b.ttft_ns - measured_ns) / 1e6)
    print(
        f"{lib}: hoptrace TTFT - client-timed first content (ms): "
        + ", ".join(f"{d:+.3f}" for d in diffs)
    )
    assert all(abs(d) <= TTFT_TOLERANCE_MS for d in diffs), diffs


def test_client_ttft_is_absent_without_first_chunk_mark(runs):
    run = runs("openai-v2")
    for tid in run.trace_ids:
        mine = [s for s in run.traces[tid] if s.service == SERVICE]
        assert all(s.first_token_ns is None for s in mine)
    result = analyze(run.traceset())
    # openai-v2 marks no first chunk, and only the client's own service can give the
    # client-perceived point; the gateway's mark is not the client's.
    assert result.ttft is None
    assert all(b.ttft_ns is None for b in result.breakdowns)
    shares = {g.name: g.share for g in result.groups}
    assert shares.get("client", 0.0) > 0.0 and shares.get("other", 0.0) == 0.0


def test_store_holds_no_prompt_text_after_instrumented_clients(chain, runs):
    for lib in LIBS:
        run = runs(lib)
        # Not vacuous: every library exported the prompt in a span attribute.
        assert run.summary["canary_keys"], f"{lib} exported no prompt text to drop"
    health = httpx.get(chain.collector.endpoint + "/healthz", timeout=5).json()
    assert health.get("content_attributes_dropped", 0) > 0, health
    store = Path(chain.collector.store.path)
    files = [p for p in (store, Path(f"{store}-wal")) if p.exists()]
    assert store in files
    for path in files:
        assert CANARY not in path.read_bytes(), f"prompt text in {path.name}"
    for lib in LIBS:
        for spans in runs(lib).traces.values():
            for span in spans:
                assert "PROMPT-CANARY" not in repr(span.attributes) + span.name
