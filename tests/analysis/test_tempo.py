"""Grafana Tempo as a source: search, fetch by id, both body shapes, limits, bad answers.

Every test talks HTTP to a stand-in on 127.0.0.1 that answers as Tempo does
(tests/analysis/standins.py says from which of Tempo's sources and docs).
"""

from __future__ import annotations

import base64
import json

import pytest

from tests.analysis.standins import (
    Recorder,
    StandIn,
    TempoStandIn,
    numbers_of,
    otlp_file,
    recent_traces,
    tempo_json,
)
from tests.helpers import hoptrace
from tests.synthetic import to_otlp_json
from tracer._errors import ConfigError, SourceError
from tracer.analysis import analyze, load
from tracer.analysis.loaders.arrival import wait_for_traces
from tracer.analysis.loaders.tempo import load_tempo, traceql
from tracer.analysis.query import Query


def _tempo(traces, **kwargs):
    standin = TempoStandIn(**kwargs)
    for spans in traces:
        standin.put(spans)
    return standin


def test_tempo_v2_traces_give_the_shares_and_percentiles_of_the_sameotlp_file(tmp_path):
    traces = recent_traces(30)
    reference = analyze(load([otlp_file(tmp_path, traces)]))
    listener = Recorder()
    with _tempo(traces).running() as tempo:
        result = analyze(load([tempo.url], listener=listener))
    assert numbers_of(result) == numbers_of(reference)
    assert result.traces == 30  # more than Tempo's default of 20: the limit was asked for
    assert listener.found_lines == [f"{tempo.url} is Grafana Tempo 2.8.1"]
    (search,) = [params for path, params in tempo.requests if path == "/api/search"]
    assert search["q"] == "{ } with (most_recent=true)"
    assert search["limit"] == "101"
    assert int(search["end"]) - int(search["start"]) == 3600
    assert len(tempo.paths("/api/v2/traces/")) == 30 and not tempo.paths("/api/traces/")


def test_tempo_before_2_6_is_read_from_the_first_trace_path_in_batches(tmp_path):
    traces = recent_traces(12)
    reference = analyze(load([otlp_file(tmp_path, traces)]))
    with _tempo(traces, version="2.5.0", has_v2=False).running() as tempo:
        result = analyze(load([tempo.url]))
    assert numbers_of(result) == numbers_of(reference)
    # One 404 on the v2 path teaches the loader; every trace comes from /api/traces/<id>.
    assert len(tempo.paths("/api/v2/traces/")) <= 8  # the first round of concurrent asks
    assert len(tempo.paths("/api/traces/")) == 12


def test_tempos_json_has_base64_ids_enum_kinds_and_int64_strings():
    (spans,) = recent_traces(1)
    body = tempo_json(to_otlp_json(spans))
    span = body["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    assert span["traceId"].endswith("==") and span["spanId"].endswith("=")
    assert span["kind"].startswith("SPAN_KIND_")
    assert isinstance(span["startTimeUnixNano"], str)


@pytest.mark.parametrize("shape", ["batches", "trace", "resourceSpans"])
def test_a_tempo_trace_downloaded_as_a_file_is_a_source(tmp_path, shape):
    traces = recent_traces(6)
    reference = analyze(load([otlp_file(tmp_path, traces)]))
    folder = tmp_path / "tempo"
    folder.mkdir()
    for i, spans in enumerate(traces):
        body = tempo_json(to_otlp_json(spans))
        if shape == "batches":
            body = {"batches": body["resourceSpans"]}
        elif shape == "trace":
            body = {"trace": body}
        (folder / f"{i}.json").write_text(json.dumps(body, indent=2))
    assert numbers_of(analyze(load([folder]))) == numbers_of(reference)


def test_a_search_matching_more_than_the_limit_keeps_the_newest_and_says_so():
    traces = recent_traces(30)  # newest first
    with _tempo(traces).running() as tempo:
        loaded = load([tempo.url], Query(limit=5))
    assert set(loaded.traces) == {t[0].trace_id for t in traces[:5]}
    assert "Tempo matched more than 5 traces: --limit 5 kept the 5 most recent" in (
        loaded.warnings.messages
    )
    assert len(tempo.paths("/api/v2/traces/")) == 5  # the sixth is only counted


def test_a_search_the_backend_cuts_at_its_default_of_20_is_said():
    traces = recent_traces(30)
    # The limit parameter does not reach Tempo, so its default of 20 applies; its
    # search stops with jobs left, which says that more matched.
    with _tempo(traces, drops_limit=True).running() as tempo:
        loaded = load([tempo.url])
    assert len(loaded.traces) == 20
    (message,) = [m for m in loaded.warnings.messages if m.startswith("Tempo returned")]
    assert message.startswith(
        "Tempo returned 20 traces although 100 were asked for, and stopped searching "
        "after 4 of 6 jobs: more traces match than it returned."
    )


def test_a_tempo_before_2_4_capping_at_its_max_result_limit_is_said():
    old = _tempo(recent_traces(30), version="2.3.0", has_v2=False, knows_hints=False)
    old.max_limit, old.limit_error = 20, False
    with old.running() as tempo:
        loaded = load([tempo.url])
    assert len(loaded.traces) == 20
    assert any(
        m.startswith("Tempo returned 20 traces although 100") for m in loaded.warnings.messages
    )
    assert any("does not read TraceQL hints" in m for m in loaded.warnings.messages)


def test_a_max_result_limit_refusal_is_asked_again_within_it_and_said():
    with _tempo(recent_traces(30), max_limit=10).running() as tempo:
        loaded = load([tempo.url], Query(limit=25))
    assert len(loaded.traces) == 10
    assert [p["limit"] for path, p in tempo.requests if path == "/api/search"] == ["26", "10"]
    assert (
        "Tempo's max_result_limit is 10, below the 25 traces asked for: at most 10 were read, "
        "and more may match" in loaded.warnings.messages
    )


def test_fewer_matches_than_asked_say_nothing():
    with _tempo(recent_traces(30)).running() as tempo:
        loaded = load([tempo.url], Query(service="gateway", limit=40))
    assert len(loaded.traces) == 30 and not loaded.warnings.messages
    (search,) = [p for path, p in tempo.requests if path == "/api/search"]
    assert search["q"] == '{ resource.service.name = "gateway" } with (most_recent=true)'


def test_a_tempo_without_query_hints_is_searched_again_without_them():
    with _tempo(
        recent_traces(8), version="2.3.0", knows_hints=False, has_v2=False
    ).running() as tempo:
        loaded = load([tempo.url])
    assert len(loaded.traces) == 8
    assert any("does not read TraceQL hints" in m for m in loaded.warnings.messages)


def test_traceql_of_service_and_operation_is_one_span_of_both():
    assert traceql(None, None) == "{ }"
    assert traceql('a"b', "POST /x") == '{ resource.service.name = "a\\"b" && name = "POST /x" }'


def test_a_user_query_is_sent_as_given_and_service_still_selects():
    traces = recent_traces(10)
    with _tempo(traces).running() as tempo:
        loaded = load(
            [tempo.url], Query(traceql='{ name = "POST /v1/chat/completions" }', run="nope")
        )
    assert not loaded.traces  # --run selected none of the traces found
    (search,) = [p for path, p in tempo.requests if path == "/api/search"]
    assert search["q"] == '{ name = "POST /v1/chat/completions" } with (most_recent=true)'
    with pytest.raises(ConfigError, match="--query is TraceQL"):
        load(["traces.jsonl"], Query(traceql="{ }"))


def test_bad_answers_for_single_traces_are_counted_and_the_rest_analysed(tmp_path):
    traces = recent_traces(30)
    ids = [t[0].trace_id for t in traces]
    failures = {ids[3]: "503", ids[7]: "gone", ids[11]: "hang"}
    reference = analyze(
        load([otlp_file(tmp_path, [t for t in traces if t[0].trace_id not in failures])])
    )
    from tracer.analysis.model.traceset import TraceSet

    loaded = TraceSet()
    with _tempo(traces, failures=failures).running() as tempo:
        load_tempo(tempo.url, loaded, timeout_s=0.5)
    assert len(loaded.traces) == 27 and loaded.warnings.skipped_traces == 3
    (message,) = [m for m in loaded.warnings.messages if "could not be read" in m]
    assert message.startswith(f"Tempo at {tempo.url}: 3 of 30 traces could not be read (")
    for part in ("1 answered 503", "1 not found (404)", "1 timed out"):
        assert part in message
    assert numbers_of(analyze(loaded)) == numbers_of(reference)


def test_progress_is_reported_past_a_few_dozen_traces():
    listener = Recorder()
    with _tempo(recent_traces(40)).running() as tempo:
        load([tempo.url], Query(backend="tempo"), listener=listener)
    assert listener.found_lines == []  # the backend was given, not asked
    assert listener.progress[-1] == (40, 40) and len(listener.progress) == 40
    quiet = Recorder()
    with _tempo(recent_traces(30)).running() as tempo:
        load([tempo.url], listener=quiet)
    assert quiet.progress == []


def test_the_bench_reads_its_traces_from_tempo_by_id_until_complete():
    traces = recent_traces(12)
    wanted = {t[0].trace_id for t in traces[:6]}
    late = sorted(wanted)[:2]
    with _tempo(traces, arrives_after={late[0]: 2, late[1]: 1}).running() as tempo:
        found, incomplete = wait_for_traces(
            tempo.url, wanted, deadline_s=20, since_s=600, min_services=2, poll_s=0.01
        )
    assert set(found.traces) == wanted and incomplete == 0
    assert not tempo.paths("/api/search")
    asked = [p.rsplit("/", 1)[1] for p in tempo.paths("/api/") if "traces/" in p]
    # Each trace is asked for until it is there, then not again.
    assert set(asked) == wanted
    assert all(asked.count(t) == 1 for t in wanted - set(late))
    assert asked.count(late[0]) >= 3 and asked.count(late[1]) >= 2


class _Neither(StandIn):
    def answer(self, path, params):
        return 404, "text/plain; charset=utf-8", b"404 page not found\n"


def test_a_url_that_is_neither_backend_is_one_clear_line():
    with _Neither().running() as other:
        with pytest.raises(SourceError, match="answers neither as Grafana Tempo"):
            load([other.url])
        proc = hoptrace("analyze", other.url)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"hoptrace: error: {other.url!r} answers neither")
    assert proc.stderr.count("\n") == 1


def test_the_cli_says_it_found_tempo_and_reports_what_the_limit_cut():
    with _tempo(recent_traces(30)).running() as tempo:
        proc = hoptrace("analyze", tempo.url, "--limit", "5", "--format", "json")
        bad = hoptrace("analyze", tempo.url, "--query", "{ span.x > }")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[0] == f"hoptrace: {tempo.url} is Grafana Tempo 2.8.1"
    out = json.loads(proc.stdout)
    assert out["traces"] == 5
    assert (
        "Tempo matched more than 5 traces: --limit 5 kept the 5 most recent"
        in (out["warnings"]["messages"])
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "answered 400 to the search '{ span.x > }': invalid TraceQL query" in bad.stderr


def test_credentials_in_the_url_and_tenant_headers_reach_tempo_and_stay_out_of_messages(
    tmp_path, monkeypatch
):
    traces = recent_traces(6)
    reference = analyze(load([otlp_file(tmp_path, traces)]))
    basic = "Basic " + base64.b64encode(b"reader:s3cret").decode()
    tempo = _tempo(traces)
    tempo.required_headers = {"X-Scope-OrgID": "acme", "Authorization": basic}
    monkeypatch.setenv("HOPTRACE_BACKEND_HEADERS", "X-Scope-OrgID=acme")
    with tempo.running():
        url = tempo.url.replace("http://", "http://reader:s3cret@")
        listener = Recorder()
        result = analyze(load([url], listener=listener))
        assert numbers_of(result) == numbers_of(reference)
        assert listener.found_lines == [f"{tempo.url} is Grafana Tempo 2.8.1"]
        # Without the tenant, Tempo's 401 is one line, and the password is not in it.
        monkeypatch.delenv("HOPTRACE_BACKEND_HEADERS")
        with pytest.raises(SourceError) as refused:
            load([url], Query(backend="tempo"))
        assert "401" in str(refused.value) and "s3cret" not in str(refused.value)
        for backend in ("tempo", "auto"):  # the search refused; the probe refused
            out = hoptrace("analyze", url, "--backend", backend)
            assert out.returncode == 2 and "s3cret" not in out.stderr + out.stdout
            (line,) = out.stderr.strip().splitlines()
            assert "401" in line and "HOPTRACE_BACKEND_HEADERS" in line


def test_waiting_for_traces_sends_the_credentials_and_tenant_to_the_probe_too(monkeypatch):
    # wait_for_traces (hoptrace bench) resolves the backend itself: the probe carries the
    # URL's user:password and HOPTRACE_BACKEND_HEADERS, as every later request does.
    traces = recent_traces(4)
    basic = "Basic " + base64.b64encode(b"reader:s3cret").decode()
    tempo = _tempo(traces)
    tempo.required_headers = {"X-Scope-OrgID": "acme", "Authorization": basic}
    monkeypatch.setenv("HOPTRACE_BACKEND_HEADERS", "X-Scope-OrgID=acme")
    wanted = {t[0].trace_id for t in traces}
    with tempo.running():
        url = tempo.url.replace("http://", "http://reader:s3cret@")
        found, incomplete = wait_for_traces(url, wanted, deadline_s=10, since_s=600, poll_s=0.01)
    assert set(found.traces) == wanted and incomplete == 0
    assert len(tempo.paths("/api/status/buildinfo")) == 1


def test_a_malformed_backend_headers_setting_is_a_config_error(monkeypatch):
    monkeypatch.setenv("HOPTRACE_BACKEND_HEADERS", "X-Scope-OrgID acme")
    with pytest.raises(ConfigError, match="HOPTRACE_BACKEND_HEADERS must be name=value"):
        load(["http://127.0.0.1:9"])
