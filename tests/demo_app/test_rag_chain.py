"""The RAG profile for real: its context assembly runs retrieval and keyword search in
parallel, so a faster retrieval hands the critical path to the keyword search.

Its own module: the client's tracer is set up here with a store of the test's own, which
``tracer.setup`` would not do while test_chain.py's module chain holds the client's."""

from __future__ import annotations

import pytest

import tracer
from demo_app.chain import Chain
from demo_app.client import run_requests
from tests.helpers import fresh_tracer_provider
from tracer.analysis import analyze

pytestmark = pytest.mark.integration


def test_the_rag_profile_runs_retrieval_and_keyword_search_in_parallel(tmp_path):
    """A RAG chain for real: the keyword search (35 ms) is hidden beside retrieval (60
    ms); with retrieval 4x faster (15 ms) it becomes the critical branch, as the
    what-if of the first run projects."""
    from tracer.analysis import what_if
    from tracer.analysis.loaders.arrival import wait_for_traces

    runs = {}
    for profile in ("rag", "rag,context.retrieval=4"):
        store = tmp_path / f"{len(runs)}.db"
        with Chain(store, profile=profile) as chain:
            fresh_tracer_provider()
            tracer.setup(service_name="client", endpoint=chain.collector.endpoint)
            try:
                results = run_requests(chain.base_url, chain.api_key, requests=12,
                                       concurrency=1, run=profile, stream=False)  # fmt: skip
                tracer.force_flush()
                ids = {r.trace_id for r in results if r.status == 200}
                traces, partial = wait_for_traces(
                    str(store), ids, deadline_s=20.0, since_s=120.0,
                    services=("client", "gateway", "app", "model"),
                )  # fmt: skip
            finally:
                tracer.shutdown()
        assert len(traces.traces) == 12 and partial == 0
        runs[profile] = traces
    base = analyze(runs["rag"])
    shares = {g.name: g for g in base.groups}
    # Retrieval is on the critical path, the keyword search beside it is not.
    assert shares["context.retrieval"].mean_ms == pytest.approx(60, rel=0.25)
    assert "context.keyword" not in shares or shares["context.keyword"].mean_ms < 10
    faster = analyze(runs["rag,context.retrieval=4"])
    after = {g.name: g for g in faster.groups}
    # 4x faster retrieval (15 ms): the 35 ms keyword search is now what context waits for.
    assert after["context.keyword"].mean_ms == pytest.approx(35, rel=0.3)
    # The retiming keeps the dependencies: it projects the keyword search taking over,
    # a saving of 60 - 35 = 25 ms, not the 45 ms of Amdahl's law on the critical path.
    projected = what_if(runs["rag"], "context.retrieval", 4)
    saved = projected.before.mean - projected.after.mean
    assert saved == pytest.approx(25, abs=8)
