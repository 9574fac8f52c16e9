"""Jaeger's query API as a source: camelCase (2.19+) and snake_case parameters, api/v3
and v1, traces by id, errors.

Every test talks HTTP to a stand-in on 127.0.0.1 that answers as Jaeger does
(tests/analysis/standins.py says from which of Jaeger's sources).
"""

from __future__ import annotations

import orjson
import pytest

from tests.analysis.standins import JaegerStandIn, Recorder, numbers_of, otlp_file, recent_traces
from tests.helpers import hoptrace
from tracer._errors import ConfigError
from tracer.analysis import analyze, load
from tracer.analysis.loaders.arrival import wait_for_traces
from tracer.analysis.model.traceset import TraceSet
from tracer.analysis.query import Query
from tracer.analysis.render import analysis_dict


def _jaeger(traces, **kwargs):
    standin = JaegerStandIn(**kwargs)
    for spans in traces:
        standin.put(spans)
    return standin


def _searches(standin):
    return [params for path, params in standin.requests if path == "/api/v3/traces"]


def test_jaeger_2_19_and_later_are_searched_with_camel_case_parameters(tmp_path):
    traces = recent_traces(24)
    reference = analyze(load([otlp_file(tmp_path, traces)]))
    listener = Recorder()
    with _jaeger(traces).running() as jaeger:
        result = analyze(load([jaeger.url], Query(service="client"), listener=listener))
    assert numbers_of(result) == numbers_of(reference)
    assert listener.found_lines == [f"{jaeger.url} is Jaeger"]
    (search,) = _searches(jaeger)
    assert set(search) == {
        "query.serviceName",
        "query.startTimeMin",
        "query.startTimeMax",
        "query.searchDepth",
    }
    assert search["query.serviceName"] == "client" and search["query.searchDepth"] == "101"


def test_jaeger_before_2_19_gets_snake_case_after_its_400(tmp_path):
    traces = recent_traces(24)
    reference = analyze(load([otlp_file(tmp_path, traces)]))
    with _jaeger(traces, version=(2, 18)).running() as jaeger:
        loaded = load([jaeger.url])  # every service: client, gateway, app, model
    assert numbers_of(analyze(loaded)) == numbers_of(reference)
    # Each trace was found by all four searches, and is held once.
    assert sum(map(len, loaded.traces.values())) == sum(map(len, traces))
    searches = _searches(jaeger)
    assert "query.serviceName" in searches[0] and "query.service_name" in searches[1]
    # Once known, the snake_case names go first: one search per further service.
    assert all("query.service_name" in s for s in searches[1:])
    assert len(searches) == 1 + len({s.service for t in traces for s in t})


def test_no_traces_found_is_an_empty_answer_not_a_warning():
    with _jaeger([]).running() as jaeger:
        loaded = load([jaeger.url], Query(service="nobody", backend="jaeger"))
    assert not loaded.traces and not loaded.warnings.messages


def test_an_empty_jaeger_without_the_v1_api_is_jaeger_with_no_traces():
    # Its api/v3 lists no service as {} (the real Jaeger does), and there is no v1
    # /api/services to fall back on after 2.20.
    with _jaeger([], has_v1=False).running() as jaeger:
        listener = Recorder()
        loaded = load([jaeger.url], listener=listener)
    assert listener.found_lines == [f"{jaeger.url} is Jaeger"]
    assert not loaded.traces and not loaded.warnings.messages
    assert jaeger.paths("/api/services") == []


def test_a_search_matching_more_than_the_limit_keeps_the_newest_and_says_so():
    traces = recent_traces(12)
    # Received oldest first, as a live service sends them: Jaeger's memory store answers
    # the last received (tests/backends/test_jaeger.py), here the newest.
    with _jaeger(traces[::-1]).running() as jaeger:
        loaded = load([jaeger.url], Query(service="client", limit=4))
    assert set(loaded.traces) == {t[0].trace_id for t in traces[:4]}
    assert (
        "Jaeger matched more than 4 traces of service 'client': --limit 4 kept the 4 most "
        "recent" in loaded.warnings.messages
    )


def test_a_jaeger_without_api_v3_is_searched_with_the_v1_api(tmp_path):
    traces = recent_traces(6)
    reference = analyze(load([otlp_file(tmp_path, traces)]))
    with _jaeger(traces, has_v3=False).running() as jaeger:
        result = analyze(load([jaeger.url], Query(service="client")))
    assert numbers_of(result) == numbers_of(reference)
    assert [p for p, _ in jaeger.requests if p == "/api/traces"] == ["/api/traces"]


def test_a_real_api_v3_trace_by_id_equals_the_same_file(fixtures_dir):
    path = fixtures_dir / "hotrod_apiv3_getTrace.json"
    body = orjson.loads(path.read_bytes())
    trace_id = "2ea75461946a7dd10f2c15ab36a076cb"
    with JaegerStandIn(raw={trace_id: body}).running() as jaeger:
        by_id = load([jaeger.url], Query(backend="jaeger"), trace_ids=[trace_id.upper()])
    assert jaeger.paths("/api/v3/traces/") == [f"/api/v3/traces/{trace_id}"]
    assert numbers_of(analyze(by_id)) == numbers_of(analyze(load([path])))


def test_traces_by_id_count_what_is_missing_or_failing_and_read_the_rest():
    traces = recent_traces(10)
    ids = [t[0].trace_id for t in traces]
    loaded = TraceSet()
    with _jaeger(traces, failures={ids[1]: "503", ids[2]: "gone"}).running() as jaeger:
        loaded = load([jaeger.url], Query(backend="jaeger"), trace_ids=ids)
    assert len(loaded.traces) == 8 and loaded.warnings.skipped_traces == 2
    (message,) = loaded.warnings.messages
    assert "2 of 10 traces could not be read (" in message
    assert "1 answered 500" in message and "1 not found (404)" in message


def test_traces_by_id_from_a_jaeger_without_api_v3_come_from_v1():
    traces = recent_traces(4)
    with _jaeger(traces, has_v3=False).running() as jaeger:
        found, incomplete = wait_for_traces(
            jaeger.url, {t[0].trace_id for t in traces}, deadline_s=10, since_s=60, poll_s=0.01
        )
    assert len(found.traces) == 4 and incomplete == 0
    assert len(jaeger.paths("/api/traces/")) == 4


def test_traceql_is_refused_for_jaeger():
    with _jaeger(recent_traces(2)).running() as jaeger:
        with pytest.raises(ConfigError, match="is Jaeger: select with --service"):
            load([jaeger.url], Query(traceql="{ }"))


def test_reports_link_traces_to_the_jaeger_that_was_analysed(tmp_path):
    # Without --jaeger-url the trace links go to the Jaeger the traces came from (its UI
    # is served at the query API's base), not to localhost:16686; --jaeger-url wins.
    traces = recent_traces(6)
    with _jaeger(traces).running() as jaeger:
        source = jaeger.url.replace("http://", "http://reader:s3cret@")
        table = hoptrace("analyze", source, "--service", "client")
        page = tmp_path / "r.html"
        report = hoptrace("report", source, "--service", "client", "-o", str(page))
        chosen = hoptrace(
            "analyze", jaeger.url, "--service", "client", "--jaeger-url", "http://ui:1"
        )
    assert table.returncode == 0, table.stderr
    assert f"{jaeger.url}/trace/<id>" in " ".join(table.stdout.split())
    assert "localhost:16686" not in table.stdout and "s3cret" not in table.stdout
    assert report.returncode == 0, report.stderr
    html = page.read_text()
    assert f'href="{jaeger.url}/trace/' in html and "s3cret" not in html
    assert "http://ui:1/trace/<id>" in " ".join(chosen.stdout.split())
    # What the URL is was asked once per command, when it was read, not again for links.
    assert len(jaeger.paths("/api/status/buildinfo")) == 3


def test_dask_on_a_jaeger_url_asks_what_it_is_once_and_reads_it_here():
    # --engine dask takes only Tempo URLs onto a cluster; a Jaeger URL is read in this
    # process, with the backend it was found to be (not probed a second time).
    from tracer.analysis.execution.pipeline import analyze_sources

    traces = recent_traces(5)
    with _jaeger(traces).running() as jaeger:
        local, _ = analyze_sources([jaeger.url], Query(service="client"))
        probes = len(jaeger.paths("/api/status/buildinfo"))
        dask, _ = analyze_sources([jaeger.url], Query(service="client", engine="dask"))
    assert analysis_dict(dask) == analysis_dict(local) and dask.traces == 5
    assert len(jaeger.paths("/api/status/buildinfo")) - probes == 1
