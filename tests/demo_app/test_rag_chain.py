"""The RAG profile for real: its context assembly runs retrieval and keyword search in
parallel, so a faster retrieval hands the critical path to the keyword search.

Its own module: the client's tracer is set up here with a store of the test's own, which
``tracer.setup`` would not do while test_chain.py's module chain holds the client's."""

from __future__ import annotations

import pytest

from tests.helpers import chain_traces
from tracer.analysis import analyze

pytestmark = pytest.mark.integration


def test_the_rag_profile_runs_retrieval_and_keyword_search_in_parallel(tmp_path):
    """A RAG chain for real: the keyword search (35 ms) is hidden beside retrieval (60
    ms); with retrieval 4x faster (15 ms) it becomes the critical branch, as the
    what-if of the first run projects."""
    from tracer.analysis import what_if

    runs = {}
    for profile in ("rag", "rag,context.retrieval=4"):
        traces = chain_traces(tmp_path / f"{len(runs)}.db", profile, 12, False)
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
