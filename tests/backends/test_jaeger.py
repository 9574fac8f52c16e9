"""The Jaeger source of the analyzer against the real Jaeger v2 (its OTLP receiver, memory
store and query service), and the real answers beside what the stand-in in
tests/analysis/standins.py says."""

from __future__ import annotations

import datetime as dt
import random

import httpx
import orjson
import pytest

from tests.analysis.standins import JaegerStandIn, numbers_of, otlp_file, recent_traces
from tests.backends import programs
from tests.helpers import eventually, hoptrace
from tests.synthetic import to_otlp_json
from tracer.analysis import analyze, load
from tracer.analysis.query import Query

pytestmark = [pytest.mark.integration, pytest.mark.backends]

COUNT = 24


def _post(jaeger: programs.Process, traces: list) -> None:
    """Send each trace and wait until Jaeger has stored it before the next: its batch
    processor hands the store a batch's traces in no set order (a Go map's)."""
    base = jaeger.urls["query"]
    for spans in traces:
        resp = httpx.post(
            f"{jaeger.urls['otlp_http']}/v1/traces",
            content=orjson.dumps(to_otlp_json(spans)),
            headers={"Content-Type": "application/json"},
        )
        assert resp.status_code == 200, resp.text
        stored = eventually(
            lambda tid=spans[0].trace_id: httpx.get(f"{base}/api/v3/traces/{tid}").status_code,
            lambda status: status == 200,
        )
        assert stored == 200


def _rfc3339(ts: dt.datetime) -> str:
    return ts.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _search(base: str, **params: object) -> httpx.Response:
    now = dt.datetime.now(dt.UTC)
    full = {
        "query.start_time_min": _rfc3339(now - dt.timedelta(hours=1)),
        "query.start_time_max": _rfc3339(now),
        **params,
    }
    return httpx.get(f"{base}/api/v3/traces", params={k: v for k, v in full.items() if v})


def _ids(resp: httpx.Response) -> set[str]:
    body = resp.json()["result"]
    return {
        s["traceId"] for rs in body["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]
    }


def test_an_empty_real_jaeger_lists_no_service_as_an_empty_object(tmp_path):
    with programs.jaeger(tmp_path) as jaeger:
        base = jaeger.urls["query"]
        assert httpx.get(f"{base}/api/v3/services").json() == {}
        loaded = load([base])
    assert not loaded.traces and not loaded.warnings.messages


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A running Jaeger holding ``COUNT`` traces, received in a shuffled order; the
    order they were sent in."""
    traces = recent_traces(COUNT)
    sent = list(traces)
    random.Random(7).shuffle(sent)
    with programs.jaeger(tmp_path_factory.mktemp("jaeger")) as jaeger:
        _post(jaeger, sent)
        base = jaeger.urls["query"]
        found = eventually(
            lambda: _search(base, **{"query.service_name": "client", "query.num_traces": 1000}),
            lambda r: r.status_code == 200 and len(_ids(r)) == COUNT,
        )
        assert len(_ids(found)) == COUNT, found.text
        yield base, traces, sent


def test_the_real_jaeger_gives_the_same_numbers_as_the_same_traces_in_a_file(stored, tmp_path):
    base, traces, _ = stored
    reference = analyze(load([otlp_file(tmp_path, traces)]))
    every_service = load([base])  # four searches, each finding every trace
    assert numbers_of(analyze(every_service)) == numbers_of(reference)
    assert sum(map(len, every_service.traces.values())) == sum(map(len, traces))
    by_client = load([base], Query(service="client"))
    assert set(by_client.traces) == {t[0].trace_id for t in traces}
    assert not by_client.warnings.messages


def test_the_real_jaeger_answers_the_api_v3_search_with_hex_ids_and_one_merged_list(stored):
    base, traces, _ = stored
    resp = _search(base, **{"query.service_name": "gateway", "query.num_traces": 100})
    assert resp.status_code == 200  # JSON, though its Content-Type says text/plain
    assert _ids(resp) == {t[0].trace_id for t in traces}  # 32 hex digits, leading zeros kept


def test_the_real_jaeger_needs_both_start_times_and_reads_only_snake_case_names(stored):
    base, _, _ = stored
    resp = httpx.get(f"{base}/api/v3/traces", params={"query.service_name": "client"})
    assert resp.status_code == 400
    assert resp.json()["error"]["message"] == (
        "query.start_time_min and query.start_time_max are required"
    )
    now = dt.datetime.now(dt.UTC)
    camel = {
        "query.serviceName": "client",
        "query.startTimeMin": _rfc3339(now - dt.timedelta(hours=1)),
        "query.startTimeMax": _rfc3339(now),
    }
    assert httpx.get(f"{base}/api/v3/traces", params=camel).status_code == 400  # before 2.19


def test_the_real_jaeger_answers_404_no_traces_found_and_the_loader_reads_it_as_empty(stored):
    base, _, _ = stored
    resp = _search(base, **{"query.service_name": "nobody", "query.num_traces": 10})
    assert resp.status_code == 404
    assert resp.json() == {"error": {"httpCode": 404, "message": "No traces found"}}
    loaded = load([base], Query(service="nobody", backend="jaeger"))
    assert not loaded.traces and not loaded.warnings.messages


def test_the_real_jaeger_refuses_a_search_without_a_depth(stored):
    # The memory store takes a search depth between 1 and max_traces, and none is 0: an
    # error the stand-in (default 100) does not give. The loader always sends one.
    base, _, _ = stored
    resp = _search(base, **{"query.service_name": "client"})
    assert resp.status_code == 500
    assert "search depth must be greater than 0" in resp.json()["error"]["message"]
    too_deep = _search(base, **{"query.service_name": "client", "query.num_traces": 100_001})
    assert too_deep.status_code == 500


def test_the_real_jaegers_search_depth_keeps_the_last_received_not_the_newest(stored):
    # The memory store walks its ring from the trace it stored last; the stand-in
    # sorted by start time. The two differ when traces arrive out of start order.
    base, _, sent = stored
    resp = _search(base, **{"query.service_name": "client", "query.num_traces": 4})
    assert _ids(resp) == {t[0].trace_id for t in sent[-4:]}
    standin = JaegerStandIn(version=(2, 18))
    for spans in sent:
        standin.put(spans)
    with standin.running():
        modelled = _search(standin.url, **{"query.service_name": "client", "query.num_traces": 4})
    assert _ids(modelled) == _ids(resp)


def test_a_limit_on_the_real_jaeger_keeps_the_newest_of_what_it_answered_and_says_so(stored):
    base, traces, sent = stored
    loaded = load([base], Query(service="client", limit=4))
    answered = sorted(sent[-5:], key=lambda t: t[0].start_ns, reverse=True)
    assert set(loaded.traces) == {t[0].trace_id for t in answered[:4]}
    assert (
        "Jaeger matched more than 4 traces of service 'client': --limit 4 kept the 4 most "
        "recent" in loaded.warnings.messages
    )


def test_the_real_jaeger_still_has_the_v1_api(stored):
    base, traces, _ = stored
    services = httpx.get(f"{base}/api/services").json()
    assert sorted(services["data"]) == ["app", "client", "gateway", "model"]
    trace_id = traces[3][0].trace_id
    v1 = httpx.get(f"{base}/api/traces/{trace_id}")
    assert v1.status_code == 200 and v1.json()["data"][0]["traceID"] == trace_id
    missing = httpx.get(f"{base}/api/v3/traces/{'f' * 32}")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "No traces found"


def test_traces_by_id_from_the_real_jaeger_equal_the_file(stored, tmp_path):
    base, traces, _ = stored
    ids = [t[0].trace_id.upper() for t in traces[:6]]
    by_id = load([base], Query(backend="jaeger"), trace_ids=ids)
    reference = load([otlp_file(tmp_path, traces[:6])])
    assert numbers_of(analyze(by_id)) == numbers_of(analyze(reference))


def test_hoptrace_analyze_of_the_real_jaeger_url(stored, tmp_path):
    base, traces, _ = stored
    done = hoptrace("analyze", base, "--service", "client", "--format", "json")
    assert done.returncode == 0, done.stderr
    data = orjson.loads(done.stdout)
    file_data = orjson.loads(
        hoptrace("analyze", str(otlp_file(tmp_path, traces)), "--format", "json").stdout
    )
    assert data["traces"] == COUNT
    assert [(g["name"], g["share"]) for g in data["groups"]] == [
        (g["name"], g["share"]) for g in file_data["groups"]
    ]
