"""Every kind of source is recognised in one place, and anything else is one clear line."""

from __future__ import annotations

import json
import os

import orjson
import pytest

from tests.analysis.standins import JaegerStandIn, TempoStandIn, recent_traces
from tests.helpers import hoptrace, shuffled_store, write_otlp_lines
from tests.synthetic import to_jaeger_json, to_otlp_json
from tracer._errors import SourceError
from tracer.analysis import analyze, analyze_sources, exemplar_traces, load
from tracer.analysis.loaders.backends import JaegerQuery, TempoQuery
from tracer.analysis.loaders.local import OtlpLines, Pipe, SpanStoreFile, Stdin, TraceFile
from tracer.analysis.loaders.sources import Folder, Several, open_source
from tracer.analysis.query import Query
from tracer.analysis.render import analysis_dict


@pytest.fixture
def files(tmp_path):
    """One source of each kind that lives on disk, of the same twelve traces."""
    traces = recent_traces(12)
    spans = [s for t in traces for s in t]
    folder = tmp_path / "folder"
    folder.mkdir()
    made = {
        "lines": write_otlp_lines(tmp_path / "traces.1", [t[:5] for t in traces] + [t[5:] for t in traces]),
        "otlp document": tmp_path / "one.json",
        "jaeger": tmp_path / "jaeger.json",
        "store": shuffled_store(tmp_path / "spans.db", spans),
        "folder": folder,
    }  # fmt: skip
    made["otlp document"].write_text(json.dumps(to_otlp_json(spans), indent=2))
    made["jaeger"].write_bytes(orjson.dumps(to_jaeger_json(spans)))
    write_otlp_lines(folder / "a.jsonl", traces)
    return made


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("lines", OtlpLines),
        ("otlp document", TraceFile),
        ("jaeger", TraceFile),
        ("store", SpanStoreFile),
        ("folder", Folder),
    ],
)
def test_each_kind_on_disk_is_told_from_its_content_and_loads_the_same_traces(files, name, kind):
    source = open_source([str(files[name])], Query())
    assert type(source) is kind
    assert analysis_dict(analyze(load([files[name]]))) == analysis_dict(
        analyze(load([files["store"]]))
    )


def test_standard_input_a_pipe_and_the_default_store_are_recognised(files, tmp_path, monkeypatch):
    assert type(open_source(["-"], Query())) is Stdin
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert type(open_source([str(fifo)], Query())) is Pipe
    monkeypatch.setenv("HOPTRACE_STORE", str(files["store"]))
    source = open_source([], Query())
    assert type(source) is SpanStoreFile and source.path == files["store"]


def test_several_lines_files_are_one_input_and_a_mix_is_loaded_part_by_part(files, tmp_path):
    second = write_otlp_lines(tmp_path / "more.jsonl", recent_traces(3, first=50))
    both = open_source([str(files["lines"]), str(second)], Query())
    assert type(both) is OtlpLines and both.paths == [files["lines"], second]
    mixed = open_source([str(files["lines"]), str(files["store"])], Query())
    assert type(mixed) is Several
    assert [type(p) for p in mixed.parts] == [OtlpLines, SpanStoreFile]


def test_a_url_is_asked_what_it_is_once_or_taken_as_the_backend_option_says():
    traces = recent_traces(5)
    tempo, jaeger = TempoStandIn(), JaegerStandIn()
    for spans in traces:
        tempo.put(spans)
        jaeger.put(spans)
    with tempo.running(), jaeger.running():
        assert type(open_source([tempo.url], Query())) is TempoQuery
        assert type(open_source([jaeger.url], Query())) is JaegerQuery
        asked = len(jaeger.requests)
        told = open_source([jaeger.url], Query(backend="jaeger"))
        assert type(told) is JaegerQuery and len(jaeger.requests) == asked  # not asked
        mixed = open_source([tempo.url, jaeger.url], Query())
        assert [type(p) for p in mixed.parts] == [TempoQuery, JaegerQuery]
        assert len(load([tempo.url, jaeger.url]).traces) == 5


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("no/such/file.jsonl", "trace source 'no/such/file.jsonl' does not exist; give a trace file"),
        ("grpc://collector:4317", "hoptrace reads http:// and https:// URLs (Jaeger, Grafana Tempo), not grpc://"),
    ],
)  # fmt: skip
def test_an_unknown_source_is_one_line_and_exit_2(given, says):
    with pytest.raises(SourceError, match=says.replace("(", r"\(").replace(")", r"\)")):
        open_source([given], Query())
    done = hoptrace("analyze", given)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("hoptrace: error: trace source ") and says in line


def test_the_exemplars_of_a_streamed_source_are_read_again_through_its_kind(files):
    for name in ("lines", "store"):
        streamed, kept = analyze_sources([str(files[name])])
        assert kept is None  # streamed: no spans kept
        found = exemplar_traces([str(files[name])], streamed)
        assert set(found.traces) == set(streamed.exemplars.values())
        assert all(len(spans) == 11 for spans in found.traces.values())
