"""Streaming analysis in bounded memory gives the whole-file analysis's numbers."""

from __future__ import annotations

import random
from pathlib import Path

import orjson
import pytest

from tests.helpers import shuffled_store, write_otlp_lines
from tests.synthetic import SEED_MS, chain_trace, to_otlp_json
from tracer._errors import ConfigError
from tracer.analysis import analyze, analyze_sources, load
from tracer.analysis.execution.bigfile import analyze_files
from tracer.analysis.query import Query
from tracer.analysis.render import analysis_dict

T0 = 1_700_000_000_000_000_000
MS = 1_000_000


def _traces(count: int, seed: int = 3) -> list[list]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        ms = {k: v * rng.uniform(0.5, 1.5) for k, v in SEED_MS.items()}
        spans = chain_trace(
            f"{i + 1:032x}", T0 + i * 900 * MS, ms, model_ttft_ms=90.0, tokens=(500, 80)
        )
        next(s for s in spans if s.parent_id is None).attributes["hoptrace.run"] = (
            "even" if i % 2 == 0 else "odd"
        )
        out.append(spans)
    return out


def _stragglers(path: Path, count: int = 40) -> Path:
    """Most traces whole and close together; every third one has its model spans
    written at the very end of the file, far past any small window; one batch of
    garbage in between."""
    early, late = [], []
    for i, spans in enumerate(_traces(count)):
        if i % 3 == 0:
            early.append([s for s in spans if s.service != "model"])
            late.append([s for s in spans if s.service == "model"])
        else:
            early.append(spans)
    write_otlp_lines(path, early + late)
    with open(path, "ab") as fh:
        fh.write(b"not json\n" + orjson.dumps(to_otlp_json(late[0])) + b"\n")  # exact copies
    return path


@pytest.mark.parametrize("window", [1, 5, 40, 1_000_000])
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_stragglers_past_the_window_are_joined_not_lost_or_counted_twice(tmp_path, window, workers):
    path = _stragglers(tmp_path / "s.jsonl")
    whole = analyze(load([path]))
    streamed = analyze_files([path], Query(workers=workers, window_spans=window))
    assert streamed.traces == whole.traces == 40
    assert streamed.spans == whole.spans
    assert analysis_dict(streamed) == analysis_dict(whole)


@pytest.mark.parametrize("group_by", ["service", "operation"])
def test_traces_split_across_files_are_joined(tmp_path, group_by):
    traces = _traces(30, seed=5)
    first = write_otlp_lines(
        tmp_path / "a.jsonl", [[s for s in t if s.service != "app"] for t in traces]
    )
    second = write_otlp_lines(
        tmp_path / "b.jsonl", [[s for s in t if s.service == "app"] for t in traces]
    )
    whole = analyze(load([first, second]), group_by)
    for workers in (1, 2):
        streamed = analyze_files(
            [first, second], Query(group_by=group_by, workers=workers, window_spans=3)
        )
        assert analysis_dict(streamed) == analysis_dict(whole)


def test_filters_see_the_joined_trace(tmp_path):
    path = _stragglers(tmp_path / "s.jsonl")
    for kwargs in ({"service": "model"}, {"run": "even"}):
        whole = analyze(load([path], Query(**kwargs)))
        streamed = analyze_files([path], Query(workers=2, **kwargs, window_spans=2))
        assert analysis_dict(streamed) == analysis_dict(whole)


def test_a_shuffled_file_gives_the_same_numbers_at_any_window(tmp_path):
    spans = [s for t in _traces(25, seed=9) for s in t]
    random.Random(1).shuffle(spans)
    path = write_otlp_lines(
        tmp_path / "shuffled.jsonl", [spans[i : i + 7] for i in range(0, len(spans), 7)]
    )
    whole = analysis_dict(analyze(load([path])))
    for window in (1, 10, 100):
        assert analysis_dict(analyze_files([path], Query(workers=1, window_spans=window))) == whole


def test_analyze_sources_streams_small_files_with_the_same_output(tmp_path):
    path = _stragglers(tmp_path / "s.jsonl")
    streamed, traces = analyze_sources([str(path)], Query(window_spans=2))
    assert traces is None  # the streaming path keeps no spans
    kept, traces = analyze_sources([str(path)], Query(keep_traces=True))
    assert traces is not None
    assert analysis_dict(streamed) == analysis_dict(kept)


def test_workers_keyword_wins_over_the_environment(tmp_path, monkeypatch):
    import tracer.analysis.execution.bigfile as bigfile

    path = _stragglers(tmp_path / "s.jsonl")
    monkeypatch.setenv("HOPTRACE_WORKERS", "4")
    monkeypatch.setenv("HOPTRACE_PARALLEL_MIN_BYTES", "1")

    def no_fork(*args, **kwargs):
        raise AssertionError("forked although workers=1")

    monkeypatch.setattr(bigfile, "_fork", no_fork)
    one, _ = analyze_sources([str(path)], Query(workers=1))
    with pytest.raises(AssertionError, match="forked"):
        analyze_sources([str(path)])
    assert one.traces == 40


def test_a_bad_window_is_a_config_error(tmp_path, monkeypatch):
    path = _stragglers(tmp_path / "s.jsonl")
    with pytest.raises(ConfigError, match="window_spans must be a positive"):
        analyze_files([path], Query(workers=1, window_spans=0))
    monkeypatch.setenv("HOPTRACE_WINDOW_SPANS", "lots")
    with pytest.raises(ConfigError, match="HOPTRACE_WINDOW_SPANS must be a positive"):
        analyze_sources([str(path)])
    monkeypatch.setenv("HOPTRACE_WINDOW_SPANS", "²")  # a digit to str.isdigit, not to int()
    with pytest.raises(ConfigError, match="HOPTRACE_WINDOW_SPANS must be a positive"):
        analyze_sources([str(path)])
    monkeypatch.setenv("HOPTRACE_WINDOW_SPANS", "3")
    monkeypatch.setenv("HOPTRACE_WORKERS", "²")
    with pytest.raises(ConfigError, match="HOPTRACE_WORKERS must be a positive"):
        analyze_sources([str(path)])


def test_the_store_is_read_trace_by_trace_with_the_same_output(tmp_path):

    path = shuffled_store(tmp_path / "spans.db", [s for t in _traces(30, seed=11) for s in t])
    whole = analyze(load([path]))
    streamed, traces = analyze_sources([str(path)])
    assert traces is None
    assert analysis_dict(streamed) == analysis_dict(whole)
    assert analysis_dict(analyze_sources([str(path)], Query(run="even"))[0]) == analysis_dict(
        analyze(load([path], Query(run="even")))
    )


def test_queued_traces_keep_their_spans_only_while_the_batch_may_give_them_back():
    """A batched trace whose remote children lie inside their parents cannot be given
    back to the scalar path: the queue holds its times, not its spans. A skewed one
    keeps its spans, is given back, and gets the scalar path's row."""
    from tracer.analysis.attribution.attribute import Attributor

    traces = _traces(3)
    attribute = Attributor(group_by="stage", stage_map=None, batched=True)
    skewed = [s for s in traces[2]]
    model = next(i for i, s in enumerate(skewed) if s.service == "model")
    skewed[model].start_ns -= 10**12  # the model's clock runs behind: shifted, scalar
    skewed[model].end_ns -= 10**12
    for seq, spans in enumerate([traces[0], traces[1], skewed]):
        attribute(spans[0].trace_id, spans, seq, 0)
    batcher = attribute._batcher
    assert batcher is not None
    (shape,) = [s for s in batcher._shapes.values()]
    assert shape.queue["spans"] == [None, skewed]  # the first trace taught the shape
    rows = attribute.table
    scalar = Attributor(group_by="stage", stage_map=None, batched=False)
    for seq, spans in enumerate([traces[0], traces[1], skewed]):
        scalar(spans[0].trace_id, spans, seq, 0)

    def by_id(table):
        return {b.trace_id: b for b in table.columns().breakdowns()}

    assert by_id(rows) == by_id(scalar.table) and len(by_id(rows)) == 3


def test_the_window_grows_to_what_the_input_needs(tmp_path):
    # Each trace's model spans are written 300 traces (3,300 spans) after its others:
    # past the first window (2,048 spans), inside its double. The traces attributed
    # before the first late part arrives (about (3,300 - 2,048) / 11 of them) come in two
    # parts (joined later); that part doubles the window, and every later trace is
    # attributed whole. A window fixed at its start leaves every trace in two parts.
    from tracer.analysis.execution.lines import LineTally
    from tracer.analysis.execution.stream import FIRST_WINDOW, stream_range
    from tracer.spans.model import Warnings

    traces = _traces(1200)
    delay = 300
    assert FIRST_WINDOW < delay * len(traces[0]) < 2 * FIRST_WINDOW
    batches = []
    for i, spans in enumerate(traces):
        batches.append([s for s in spans if s.service != "model"])
        if i >= delay:
            batches.append([s for s in traces[i - delay] if s.service == "model"])
    batches += [[s for s in spans if s.service == "model"] for spans in traces[-delay:]]
    path = write_otlp_lines(tmp_path / "late.jsonl", batches)
    parts: dict[str, int] = {}

    def attribute(tid, spans, seq, last_end):
        parts[tid] = parts.get(tid, 0) + 1

    size = path.stat().st_size
    stream_range(str(path), 0, 0, size, attribute, 20_000, Warnings(), LineTally())
    split = sorted(int(t, 16) - 1 for t, n in parts.items() if n > 1)
    assert len(parts) == len(traces)
    assert 0 < len(split) <= (delay * 11 - FIRST_WINDOW) // 11 + 2
    assert split == list(range(len(split)))  # the first traces only
    parts.clear()
    stream_range(str(path), 0, 0, size, attribute, FIRST_WINDOW, Warnings(), LineTally())
    assert sum(n > 1 for n in parts.values()) > len(traces) - 2 * delay  # fixed: most split
