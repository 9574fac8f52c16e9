"""One frozen Query goes from the command line to every engine, and both sides of
``compare`` read their sources with the same one."""

from __future__ import annotations

import dataclasses
import time

import orjson
import pytest
from click.testing import CliRunner

from tests.helpers import hoptrace, shuffled_store
from tests.synthetic import SEED_MS, chain_trace
from tracer._errors import ConfigError
from tracer.analysis.query import Query
from tracer.cli import main

MS = 1_000_000
HOUR_NS = 3600 * 1_000_000_000


def _store(path):
    """A span store of two runs, each with recent traces and traces two days old; a
    third of the traces come through a gateway named ``edge``; the auth step carries no
    stage, so only a stage map names it."""
    now = time.time_ns()
    spans = []
    n = 0
    for run, inference in (("base", 900.0), ("cand", 300.0)):
        for age_ns in (0, 48 * HOUR_NS):
            for i in range(9):
                n += 1
                ms = {**SEED_MS, "inference": inference + 11 * i, "auth": 40.0 + 9 * i}
                trace = chain_trace(f"{n:032x}", now - age_ns - (n + 1) * 1000 * MS, ms)
                for span in trace:
                    if span.parent_id is None:
                        span.attributes["hoptrace.run"] = run
                    if span.name == "verify_key":
                        span.stage = None
                        span.attributes.pop("hoptrace.stage")
                    if i % 3 == 0 and span.service == "gateway":
                        span.service = "edge"
                spans.extend(trace)
    return shuffled_store(path, spans)


def _stage_map(tmp_path):
    rules = tmp_path / "map.toml"
    rules.write_text('[[rule]]\noperation = "verify_key"\nstage = "auth"\n')
    return rules


def test_a_query_is_frozen_and_a_changed_copy_keeps_its_instant():
    query = Query(service="gateway", since="2h")
    with pytest.raises(dataclasses.FrozenInstanceError):
        query.service = "model"  # type: ignore[misc]
    later = query.but(run="bench-*")
    assert (later.run, later.service, later.since_ns) == ("bench-*", "gateway", query.since_ns)
    assert abs(query.since_ns - (time.time_ns() - 2 * HOUR_NS)) < 60 * 1_000_000_000
    assert query.keep.since_ns == query.since_ns and query.lookback_s == 7200.0


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"group_by": "host"}, "group_by must be one of stage, service, operation"),
        ({"limit": 0}, "limit must be a positive number of traces"),
        ({"since": "yesterday"}, "duration must look like"),
        ({"backend": "zipkin"}, "backend must be one of auto, jaeger, tempo"),
        ({"engine": "spark"}, "engine must be one of local, dask"),
        ({"scheduler": "tcp://127.0.0.1:8786"}, "add --engine dask"),
    ],
)
def test_a_bad_setting_fails_when_the_query_is_made(changes, message):
    with pytest.raises(ConfigError, match=message):
        Query(**changes)
    with pytest.raises(ConfigError, match=message):
        Query().but(**changes)


def _json(*args):
    done = hoptrace(*args, "--format", "json")
    assert done.returncode == 0, done.stderr
    return orjson.loads(done.stdout)


@pytest.mark.parametrize("extra", [(), ("--limit", "4")])
def test_compare_gives_each_side_what_analyze_gives_with_the_same_options(tmp_path, extra):
    store = _store(tmp_path / "spans.db")
    options = ("--since", "1h", "--service", "gateway", "--stage-map", str(_stage_map(tmp_path)))
    options += extra
    compared = _json(
        "compare", str(store), str(store), "--baseline-run", "base", "--candidate-run", "cand",
        *options,
    )  # fmt: skip
    for side, run in (("baseline", "base"), ("candidate", "cand")):
        alone = _json("analyze", str(store), "--run", run, *options)
        assert compared[side] == alone
        # The filters reached the side: 6 recent traces of the run pass a span of the
        # gateway service (the old ones and those through "edge" do not); the stage
        # map named the auth step.
        assert alone["traces"] == (4 if extra else 6)
        assert "auth" in {g["name"] for g in alone["groups"]}
    # The candidate's model is 600 ms faster: its median trace takes about 0.6 times as long.
    assert 0.5 < compared["e2e_ratio"]["p50"] < 0.7


def _captured(monkeypatch, module, name):
    """Calls to ``module.name`` recorded (their Query), the real function still run."""
    seen = []
    real = getattr(module, name)

    def spy(where, query, *args, **kwargs):
        seen.append(query)
        return real(where, query, *args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return seen


def test_the_command_line_options_arrive_in_the_one_query_the_store_engine_takes(
    tmp_path, monkeypatch
):
    import tracer.analysis.execution.bigfile as bigfile

    store = _store(tmp_path / "spans.db")
    seen = _captured(monkeypatch, bigfile, "analyze_store")
    args = [
        "analyze", str(store), "--run", "base", "--since", "1h", "--service", "gateway",
        "--group-by", "service", "--split-by", "gen_ai.request.model",
        "--stage-map", str(_stage_map(tmp_path)), "--format", "json",
    ]  # fmt: skip
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 0, done.output
    (query,) = seen
    assert isinstance(query, Query)
    assert (query.run, query.service, query.group_by, query.split_by) == (
        "base", "gateway", "service", "gen_ai.request.model",
    )  # fmt: skip
    assert query.stage_map is not None and query.since_ns is not None
    assert time.time_ns() - query.since_ns < HOUR_NS + 60 * 1_000_000_000


def test_both_sides_of_compare_take_the_same_query_but_for_the_run(tmp_path, monkeypatch):
    import tracer.analysis.execution.bigfile as bigfile

    store = _store(tmp_path / "spans.db")
    seen = _captured(monkeypatch, bigfile, "analyze_store")
    args = [
        "compare", str(store), str(store), "--baseline-run", "base", "--candidate-run", "cand",
        "--since", "1h", "--operation", "verify_key", "--group-by", "operation",
        "--stage-map", str(_stage_map(tmp_path)), "--format", "json",
    ]  # fmt: skip
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 0, done.output
    before, after = seen
    assert (before.run, after.run) == ("base", "cand")
    assert before.but(run=None) == after.but(run=None)
    assert (before.operation, before.group_by, before.since_ns) == (
        "verify_key", "operation", after.since_ns,
    )  # fmt: skip


def test_a_reports_baseline_is_read_the_same_way_without_the_candidates_filters(
    tmp_path, monkeypatch
):
    import tracer.analysis.execution.bigfile as bigfile

    store = _store(tmp_path / "spans.db")
    seen = _captured(monkeypatch, bigfile, "analyze_store")
    args = [
        "report", str(store), "--baseline", str(store), "--run", "cand", "--since", "1h",
        "--group-by", "service", "-o", str(tmp_path / "r.html"),
    ]  # fmt: skip
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 0, done.output
    candidate, baseline = seen
    assert (candidate.run, candidate.since_ns is not None) == ("cand", True)
    assert (baseline.run, baseline.since_ns, baseline.group_by) == (None, None, "service")
    assert baseline == candidate.sources_only


def test_a_files_query_reaches_the_streamed_path_with_the_worker_count_it_chose(
    tmp_path, monkeypatch
):
    import tracer.analysis.execution.bigfile as bigfile
    from tests.analysis.standins import recent_traces
    from tests.helpers import write_otlp_lines

    path = write_otlp_lines(tmp_path / "t.jsonl", recent_traces(12))
    seen = _captured(monkeypatch, bigfile, "analyze_files")
    monkeypatch.setenv("HOPTRACE_WORKERS", "2")
    args = ["whatif", str(path), "--stage", "inference", "--speedup", "4", "--since", "1h"]
    done = CliRunner().invoke(main, [*args, "--format", "json"])
    assert done.exit_code == 0, done.output
    (query,) = seen
    # A small file is not worth a fork: one worker, the rest of the query as given.
    assert (query.workers, query.projection.stage, query.projection.speedup) == (1, "inference", 4)
    assert query.since_ns is not None and query.group_by == "stage"
    assert orjson.loads(done.stdout)["traces"] == 12
