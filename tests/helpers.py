"""Helpers shared by the test modules."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")


def hoptrace(*args: str, timeout: float = 120, **kwargs: object) -> subprocess.CompletedProcess:
    """Run ``hoptrace ARGS`` in a child process; text output captured."""
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-m", "tracer.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


def eventually(probe: Callable[[], T], done: Callable[[T], bool], deadline_s: float = 20.0) -> T:
    """Call ``probe`` until ``done`` accepts its result or the deadline passes; the last
    result either way (the services export spans on their own timers)."""
    end = time.monotonic() + deadline_s
    while True:
        result = probe()
        if done(result) or time.monotonic() > end:
            return result
        time.sleep(0.1)


def skip_or_fail(reason: str) -> None:
    """Skip with one line on a developer's clone; fail in CI (``CI=true``), which must run
    every test."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: this test must run)")
    pytest.skip(reason)


def write_otlp_lines(path: Path, batches: list[list]) -> Path:
    """Write each non-empty batch of spans as one OTLP JSON line; returns ``path``."""
    import orjson

    from tests.synthetic import to_otlp_json

    path.write_bytes(b"".join(orjson.dumps(to_otlp_json(b)) + b"\n" for b in batches if b))
    return path


def shuffled_store(path: Path, spans: list, seed: int = 2, per_write: int = 13) -> Path:
    """A span store at ``path`` holding ``spans`` in a shuffled order, written in
    batches of ``per_write`` (traces end up spread over many writes)."""
    import random

    from collector.store import SpanStore

    spans = list(spans)
    random.Random(seed).shuffle(spans)
    with SpanStore(path, create=True) as store:
        for i in range(0, len(spans), per_write):
            store.write(spans[i : i + per_write])
    return path


def emit_sample_spans(tracer: object) -> None:
    """With ``tracer`` (an OpenTelemetry tracer), a SERVER span with every kind of
    attribute and an event, and a CLIENT child with a link to it and an error status:
    one of each thing an exporter must encode."""
    from opentelemetry import trace
    from opentelemetry.trace import Link, Status, StatusCode

    t: trace.Tracer = tracer  # type: ignore[assignment]
    with t.start_as_current_span(
        "parent",
        kind=trace.SpanKind.SERVER,
        attributes={"s": "x", "i": 7, "f": 1.5, "b": True, "l": ["a", "b"], "n": [1, 2]},
    ) as parent:
        parent.add_event("hoptrace.first_token", {"k": 1})
        link = Link(parent.get_span_context(), {"why": "retry"})
        with t.start_as_current_span("child", kind=trace.SpanKind.CLIENT, links=[link]) as child:
            child.set_status(Status(StatusCode.ERROR, "boom"))


def fresh_tracer_provider() -> None:
    """Forget this process's global tracer provider, so that ``tracer.setup()`` installs
    its own. OpenTelemetry sets the global provider once per process, and an earlier test
    in the same process (``capture_spans``, which installs one without an exporter) may
    have set it: under ``pytest -n`` which tests share a process varies. The same reset
    as ``reset_trace_globals`` in OpenTelemetry's own test utilities."""
    from opentelemetry import trace
    from opentelemetry.util._once import Once

    trace._TRACER_PROVIDER_SET_ONCE = Once()  # type: ignore[attr-defined]
    trace._TRACER_PROVIDER = None  # type: ignore[attr-defined]
    trace._PROXY_TRACER_PROVIDER = trace.ProxyTracerProvider()  # type: ignore[attr-defined]


def chain_traces(store: Path, profile: str, requests: int, stream: bool):
    """Run the demo chain of ``profile`` with its spans in ``store``, send ``requests``
    traced requests one at a time from a client traced into it, and return their whole
    traces (every one must arrive, with every service's spans)."""
    import tracer
    from demo_app.chain import Chain
    from demo_app.client import run_requests
    from tracer.analysis.loaders.arrival import wait_for_traces

    with Chain(store, profile=profile) as chain:
        fresh_tracer_provider()
        tracer.setup(service_name="client", endpoint=chain.collector.endpoint)
        try:
            results = run_requests(chain.base_url, chain.api_key, requests=requests,
                                   concurrency=1, run=profile, stream=stream)  # fmt: skip
            tracer.force_flush()
            ids = {r.trace_id for r in results if r.status == 200}
            traces, partial = wait_for_traces(
                str(store), ids, deadline_s=20.0, since_s=120.0,
                services=("client", "gateway", "app", "model"),
            )  # fmt: skip
        finally:
            tracer.shutdown()
    assert len(traces.traces) == requests and partial == 0
    # Read again once the chain has stopped: its services flush their last spans on the
    # way out, before the collector commits and stops. A trace can look whole before
    # then (every service in it, every parent there) with a leaf still to come, such as
    # the second and third of three calls to the model.
    from tracer.analysis.loaders import load

    return load([store]).subset(ids)
