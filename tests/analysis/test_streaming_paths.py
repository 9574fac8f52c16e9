"""whatif, --split-by, report and compare on the streaming path give the in-memory
results: the projection and the split value ride along as table columns, and the
exemplar traces a page draws are read again from their place in the input."""

from __future__ import annotations

import os
import random
import re
import sqlite3
from pathlib import Path

import orjson
import pytest

from tests.helpers import hoptrace, shuffled_store, write_otlp_lines
from tests.synthetic import SEED_MS, chain_trace
from tracer.analysis import analyze, analyze_sources, exemplar_traces, load, what_if
from tracer.analysis.aggregate import aggregate_columns
from tracer.analysis.checks.budget import check_budget, load_budget
from tracer.analysis.execution.bigfile import analyze_files
from tracer.analysis.query import Query
from tracer.analysis.render import (
    Report,
    analysis_dict,
    split_budget_dict,
    to_html,
    whatif_dict,
)
from tracer.analysis.split import split_analysis, split_by
from tracer.analysis.whatif.answer import Question, answer
from tracer.analysis.whatif.retime import Projection
from tracer.analysis.whatif.waterfall import exemplar_waterfalls

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
MODEL = "gen_ai.request.model"


def _traces(count: int, seed: int = 3) -> list[list]:
    """Chain traces of three models; every seventh carries no model attribute."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        ms = {k: v * rng.uniform(0.5, 1.5) for k, v in SEED_MS.items()}
        spans = chain_trace(
            f"{i + 1:032x}",
            T0 + i * 900 * MS,
            ms,
            model_ttft_ms=90.0,
            tokens=(500, 80),
            model="abc"[i % 3],
        )
        if i % 7 == 0:
            for s in spans:
                s.attributes.pop(MODEL, None)
        out.append(spans)
    return out


@pytest.fixture
def stragglers(tmp_path: Path) -> Path:
    """Every third trace has its model spans at the end of the file, far past a small
    window, so those traces are joined from parts."""
    early, late = [], []
    for i, spans in enumerate(_traces(45)):
        if i % 3 == 0:
            early.append([s for s in spans if s.service != "model"])
            late.append([s for s in spans if s.service == "model"])
        else:
            early.append(spans)
    return write_otlp_lines(tmp_path / "s.jsonl", early + late)


@pytest.mark.parametrize("window", [1, 5, 1_000_000])
@pytest.mark.parametrize("workers", [1, 2])
def test_whatif_streamed_equals_whatif_in_memory(stragglers, window, workers):
    projection = Projection("inference", 10.0)
    streamed = analyze_files(
        [stragglers], Query(workers=workers, window_spans=window, projection=projection)
    )
    result = projection.result(streamed.columns, streamed.loaded, streamed.tally)
    expected = what_if(load([stragglers]), "inference", 10.0)
    assert result.traces == expected.traces == 45
    assert result.realized["p50"] > 1.5  # the projection did retime the traces
    assert result.ttft_before is not None and result.ttft_after is not None
    assert whatif_dict(result) == whatif_dict(expected)


def test_whatif_of_traces_split_across_files_equals_in_memory(tmp_path):
    traces = _traces(30, seed=5)
    first = write_otlp_lines(
        tmp_path / "a.jsonl", [[s for s in t if s.service != "app"] for t in traces]
    )
    second = write_otlp_lines(
        tmp_path / "b.jsonl", [[s for s in t if s.service == "app"] for t in traces]
    )
    projection = Projection("inference", 4.0)
    expected = whatif_dict(what_if(load([first, second]), "inference", 4.0))
    for workers in (1, 2):
        a = analyze_files(
            [first, second], Query(workers=workers, window_spans=3, projection=projection)
        )
        assert whatif_dict(projection.result(a.columns, a.loaded, a.tally)) == expected


@pytest.mark.parametrize("workers", [1, 2])
def test_split_by_in_one_streamed_pass_equals_the_split_traces(stragglers, workers):
    streamed = analyze_files(
        [stragglers], Query(group_by="service", workers=workers, window_spans=2, split_by=MODEL)
    )
    parts = split_analysis(
        streamed, MODEL, lambda c, loaded, tally: aggregate_columns(c, "service", loaded, tally)
    )
    expected = split_by(load([stragglers]), MODEL, lambda part: analyze(part, "service"))
    assert [(v, n) for v, n, _ in parts.parts] == [(v, n) for v, n, _ in expected.parts]
    assert {v for v, _, _ in parts.parts} == {"(none)", "a", "b", "c"}
    assert sum(n for _, n, _ in parts.parts) == 45
    for (_, _, got), (_, _, want) in zip(parts.parts, expected.parts, strict=True):
        assert analysis_dict(got) == analysis_dict(want)


def test_split_by_an_attribute_no_trace_carries_is_a_config_error(stragglers):
    from tracer._errors import ConfigError

    streamed, _ = analyze_sources([str(stragglers)], Query(split_by="no.such.attribute"))
    with pytest.raises(ConfigError, match="no trace carries the attribute 'no.such.attribute'"):
        split_analysis(streamed, "no.such.attribute", lambda *a: None)


@pytest.mark.parametrize("workers", [1, 2])
def test_exemplar_traces_are_read_again_from_their_lines(stragglers, workers):
    streamed = analyze_files([stragglers], Query(workers=workers, window_spans=1))
    traces = load([stragglers])
    found = exemplar_traces([str(stragglers)], streamed)
    assert set(found.traces) == set(streamed.exemplars.values())
    for trace_id, spans in found.traces.items():
        assert sorted(s.span_id for s in spans) == sorted(
            s.span_id for s in traces.traces[trace_id]
        )
    assert exemplar_waterfalls(streamed, found) == exemplar_waterfalls(analyze(traces), traces)


def test_exemplar_traces_joined_across_files_are_read_to_the_end(tmp_path):
    traces = _traces(12, seed=8)
    first = write_otlp_lines(
        tmp_path / "a.jsonl", [[s for s in t if s.service != "app"] for t in traces]
    )
    second = write_otlp_lines(
        tmp_path / "b.jsonl", [[s for s in t if s.service == "app"] for t in traces]
    )
    streamed = analyze_files([first, second], Query(workers=1, window_spans=2))
    found = exemplar_traces([str(first), str(second)], streamed)
    whole = load([first, second])
    assert found.traces.keys() == set(streamed.exemplars.values())
    for trace_id, spans in found.traces.items():
        assert len(spans) == len(whole.traces[trace_id]) > 0
        assert {s.service for s in spans} >= {"app", "model"}


def test_exemplar_traces_come_from_the_store_by_id(tmp_path):

    path = shuffled_store(tmp_path / "spans.db", [s for t in _traces(20, seed=11) for s in t])
    streamed, traces = analyze_sources([str(path)])
    assert traces is None
    found = exemplar_traces([str(path)], streamed)
    whole = load([path])
    assert exemplar_waterfalls(streamed, found) == exemplar_waterfalls(analyze(whole), whole)
    assert len(exemplar_waterfalls(streamed, found)) == 2


def test_a_store_read_on_two_workers_gives_what_one_reader_and_the_file_give(tmp_path, monkeypatch):
    from tracer.analysis.execution.bigfile import analyze_store, store_bounds

    traces = _traces(60, seed=5)
    path = shuffled_store(tmp_path / "spans.db", [s for t in traces for s in t])
    with sqlite3.connect(path) as db:  # a trace none of whose spans can be read
        db.execute("UPDATE spans_000001 SET body = 'x' WHERE trace_id = ?", (f"{41:032x}",))
    monkeypatch.setenv("HOPTRACE_PARALLEL_MIN_BYTES", "0")
    assert len(store_bounds(path, 2)) == 2
    one = analysis_dict(analyze_store(path, Query(workers=1)))
    two = analysis_dict(analyze_store(path, Query(workers=2)))
    assert two == one
    assert one["traces"] == 59 and one["warnings"]["skipped_spans"] == len(traces[40])
    assert one["warnings"]["messages"] == ["store rows whose spans are not JSON were skipped"]
    lines = write_otlp_lines(tmp_path / "t.jsonl", traces[:40] + traces[41:])
    file = analysis_dict(analyze_files([lines], Query(workers=1)))
    assert {k: v for k, v in one.items() if k != "warnings"} == {
        k: v for k, v in file.items() if k != "warnings"
    }


def _page(text: str) -> str:
    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", "<time>", text)


def test_cli_whatif_report_and_check_stream_on_two_workers_with_the_old_output(
    stragglers, tmp_path
):
    env = {
        **os.environ,
        "HOPTRACE_PARALLEL_MIN_BYTES": "0",
        "HOPTRACE_WORKERS": "2",
        "HOPTRACE_WINDOW_SPANS": "2",
    }
    src = str(stragglers)
    traces = load([stragglers])

    done = hoptrace(
        "whatif", src, "--stage", "inference", "--speedup", "10", "--format", "json",
        "--model", "retime", env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    retimed = answer(what_if(traces, "inference", 10.0), lambda: traces, Question("retime"))
    assert orjson.loads(done.stdout) == orjson.loads(orjson.dumps(whatif_dict(retimed)))

    page = tmp_path / "r.html"
    done = hoptrace("report", src, "-o", str(page), "--stage", "inference", "--speedup", "4",
                    "--split-by", MODEL, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = analyze(traces)
    expected = Report(
        title=f"Where the time goes: {result.traces} traces",
        source=src,
        analysis=result,
        waterfalls=exemplar_waterfalls(result, traces, projection=("inference", 4.0)),
        # As hoptrace whatif answers it (the model chosen for the run, and why).
        whatif=answer(what_if(traces, "inference", 4.0), lambda: traces, Question()),
        split=split_by(traces, MODEL, analyze),
    )
    assert "P90 exemplar" in page.read_text()
    assert _page(page.read_text()) == _page(to_html(expected))

    budget = tmp_path / "budget.toml"
    budget.write_text("[e2e]\np50_ms = 1500\n[stage.inference]\nshare_max = 0.5\n")
    done = hoptrace("check", src, "--budget", str(budget), "--split-by", MODEL, "--format", "json",
                    env=env)  # fmt: skip
    limits = load_budget(str(budget))
    parts = split_by(
        traces, MODEL, lambda p: check_budget(analyze(p), limits, absent_stages="skip")
    )
    assert done.returncode == (0 if all(r.passed for _, _, r in parts.parts) else 1)
    assert orjson.loads(done.stdout) == orjson.loads(orjson.dumps(split_budget_dict(parts)))
