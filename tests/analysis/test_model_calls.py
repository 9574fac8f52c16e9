"""How many times each request calls a model: a per-trace column, counted on the
request's outermost inference spans, reported over the requests that call one."""

from __future__ import annotations

import pytest

from tracer.analysis import TraceSet, analyze
from tracer.analysis.attribution import batches
from tracer.analysis.attribution.attribute import Attributor
from tracer.analysis.render import analysis_dict, analysis_sections, to_table
from tracer.spans.model import KIND_CLIENT, KIND_INTERNAL, KIND_SERVER, Span

T0 = 1_760_000_000_000_000_000
MS = 1_000_000


def _request(n: int, calls: int) -> list[Span]:
    """A request to ``app`` that calls the model ``calls`` times one after the other:
    each call an SDK span (inference), its HTTP call, and the model server's span
    (inference too, inside the call: the same call, counted once)."""
    tid, t = f"{n + 1:032x}", T0 + n * 10_000 * MS
    spans = [Span(tid, "r", None, "app", "POST /chat", KIND_SERVER, t, t + 1000 * MS, "gateway")]
    spans.append(
        Span(tid, "c", "r", "app", "build context", KIND_INTERNAL, t, t + 50 * MS, "context")
    )
    for k in range(calls):
        at = t + (100 + 250 * k) * MS
        sdk, http, server = f"s{k}", f"h{k}", f"m{k}"
        spans += [
            Span(tid, sdk, "r", "app", "chat m", KIND_INTERNAL, at, at + 200 * MS, "inference"),
            Span(tid, http, sdk, "app", "POST", KIND_CLIENT, at + 5 * MS, at + 195 * MS),
            Span(tid, server, http, "model", "POST /v1/chat", KIND_SERVER, at + 10 * MS,
                 at + 190 * MS, "inference"),
        ]  # fmt: skip
    return spans


def _analysed(calls: list[int], monkeypatch, batch: str):
    traces = TraceSet()
    for n, k in enumerate(calls):
        traces.add(_request(n, k))
    monkeypatch.setenv("HOPTRACE_BATCH", batch)
    taken = []
    offer = batches.ShapeBatcher.offer
    monkeypatch.setattr(
        batches.ShapeBatcher, "offer", lambda self, *a: taken.append(offer(self, *a)) or taken[-1]
    )
    return analyze(traces), sum(taken)


@pytest.mark.parametrize("batch", ["on", "off"])
def test_each_request_counts_its_model_calls_and_the_analysis_reports_them(monkeypatch, batch):
    # Five requests each of one, two and three calls and three with none, interleaved.
    calls = [(1, 2, 3, 0)[n % 4] for n in range(15)] + [1, 2, 3]
    a, taken = _analysed(calls, monkeypatch, batch)
    # The first request of each of the four shapes is the scalar path's, the rest batched.
    assert taken == (14 if batch == "on" else 0)
    assert a.columns.model_calls.tolist() == [k or -1 for k in calls]  # -1: none
    assert [b.filled for b in a.breakdowns] == [{"model_calls": k or None} for k in calls]
    figures = {"n": 15, "mean": 2.0, "p50": 2.0, "p90": 3.0, "p99": 3.0, "min": 1.0, "max": 3.0}
    assert analysis_dict(a)["model_calls"] == figures
    assert "model calls per request: P50 2, P90 3, P99 3, mean 2 (n=15)" in to_table(
        analysis_sections(a), width=200
    )


def _stored_bytes(calls: list[int]) -> int:
    """The bytes the table holds for the column (the traces attributed a batch at a time)."""
    attribute = Attributor("stage", None, batched=True)
    for n, k in enumerate(calls):
        spans = _request(n, k)
        attribute(spans[0].trace_id, spans, n, 0)
    store = attribute.table._model_calls
    return len(store) * store.itemsize


@pytest.mark.parametrize("batch", ["on", "off"])
def test_requests_that_each_call_the_model_once_leave_the_column_out(monkeypatch, batch):
    # One call each, or none at all: nothing to say.
    once, _ = _analysed([1] * 8, monkeypatch, batch)
    never, _ = _analysed([0] * 8, monkeypatch, batch)
    assert once.columns.model_calls is None  # (every request at the usual one)
    assert never.columns.model_calls.tolist() == [-1] * 8
    for a in (once, never):
        assert "model_calls" not in analysis_dict(a) and "model_calls" not in a.summaries
        assert "model calls" not in to_table(analysis_sections(a), width=200)


def test_the_column_takes_no_bytes_while_every_request_makes_as_many_calls():
    assert _stored_bytes([1] * 40) == _stored_bytes([0] * 40) == _stored_bytes([2] * 40) == 0
    assert _stored_bytes([1] * 39 + [2]) == 4 * 40  # an int32 a request, once one differs
