"""Streaming analysis in bounded memory gives the whole-file analysis's numbers."""

from __future__ import annotations

import random
from pathlib import Path

import orjson
import pytest

from tests.helpers import shuffled_store, write_otlp_lines
from tracer._errors import ConfigError
from tracer.analysis import analyze, analyze_sources, load
from tracer.analysis.execution.bigfile import analyze_files
from tracer.analysis.render import analysis_dict
from tracer.analysis.synthetic import SEED_MS, chain_trace, to_otlp_json
from tracer.analysis.traceset import TraceFilter

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
    streamed = analyze_files([path], "stage", None, workers, window=window)
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
        streamed = analyze_files([first, second], group_by, None, workers, window=3)
        assert analysis_dict(streamed) == analysis_dict(whole)


def test_filters_see_the_joined_trace(tmp_path):
    path = _stragglers(tmp_path / "s.jsonl")
    for kwargs in ({"service": "model"}, {"run": "even"}):
        whole = analyze(load([path], **kwargs))
        streamed = analyze_files([path], "stage", None, 2, TraceFilter(**kwargs), window=2)
        assert analysis_dict(streamed) == analysis_dict(whole)


def test_a_shuffled_file_gives_the_same_numbers_at_any_window(tmp_path):
    spans = [s for t in _traces(25, seed=9) for s in t]
    random.Random(1).shuffle(spans)
    path = write_otlp_lines(
        tmp_path / "shuffled.jsonl", [spans[i : i + 7] for i in range(0, len(spans), 7)]
    )
    whole = analysis_dict(analyze(load([path])))
    for window in (1, 10, 100):
        assert analysis_dict(analyze_files([path], "stage", None, 1, window=window)) == whole


def test_analyze_sources_streams_small_files_with_the_same_output(tmp_path):
    path = _stragglers(tmp_path / "s.jsonl")
    streamed, traces = analyze_sources([str(path)], window_spans=2)
    assert traces is None  # the streaming path keeps no spans
    kept, traces = analyze_sources([str(path)], keep_traces=True)
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
    one, _ = analyze_sources([str(path)], workers=1)
    with pytest.raises(AssertionError, match="forked"):
        analyze_sources([str(path)])
    assert one.traces == 40


def test_a_bad_window_is_a_config_error(tmp_path, monkeypatch):
    path = _stragglers(tmp_path / "s.jsonl")
    with pytest.raises(ConfigError, match="window_spans must be a positive"):
        analyze_files([path], "stage", None, 1, window=0)
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
    assert analysis_dict(analyze_sources([str(path)], run="even")[0]) == analysis_dict(
        analyze(load([path], run="even"))
    )


def _reads(monkeypatch, module) -> list[str]:
    """The trace ids ``module`` reads again (its ``spans_of`` calls), as they come."""
    read_again: list[str] = []
    spans_of = module.spans_of
    monkeypatch.setattr(module, "spans_of", lambda *a: read_again.append(a[1]) or spans_of(*a))
    return read_again


def _short(spans: list) -> list:
    """The trace without its model server: a whole trace of its own shape."""
    return [s for s in spans if s.service != "model"]


def test_a_later_part_of_a_trace_whose_spans_were_dropped_reads_them_again(tmp_path, monkeypatch):
    """A trace part whose shape the batches know gets a ticket and its spans are
    dropped; when another part of it comes within the window, the dropped part is read
    again from its line and the whole trace is attributed, as without the window."""
    import tracer.analysis.execution.stream as stream

    traces = _traces(12, seed=11)
    lines = [_short(t) for t in traces[:6]]  # the short shape, learned and then ticketed
    lines += [_short(traces[6]), [s for s in traces[6] if s.service == "model"]]
    lines += [_short(t) for t in traces[7:]]
    path = write_otlp_lines(tmp_path / "late.jsonl", lines)
    read_again = _reads(monkeypatch, stream)
    whole = analysis_dict(analyze(load([path])))
    streamed = analyze_files([path], "stage", None, 1, window=20)
    assert read_again == [traces[6][0].trace_id]  # the part read again: the whole trace
    assert analysis_dict(streamed) == whole
    assert streamed.traces == 12 and streamed.spans == sum(map(len, lines))


def test_a_dropped_trace_the_batch_gives_back_is_read_again(tmp_path, monkeypatch):
    """Times past 2**62 do not fit the batch's sums: the batch gives those traces back
    to the scalar path, which reads their dropped spans again from their lines."""
    import tracer.analysis.execution.attribute as attribute

    rng = random.Random(4)
    late = 2**62 + 10**15  # the year 2116: int64 holds it, the batch's sums may not
    traces = [
        chain_trace(
            f"{i + 1:032x}",
            late + i * 900 * MS,
            {k: v * rng.uniform(0.5, 1.5) for k, v in SEED_MS.items()},
            model_ttft_ms=90.0,
        )
        for i in range(30)
    ]
    path = write_otlp_lines(tmp_path / "wide.jsonl", traces)
    read_again = _reads(monkeypatch, attribute)
    whole = analysis_dict(analyze(load([path])))
    assert analysis_dict(analyze_files([path], "stage", None, 1, window=15)) == whole
    # Every trace after the first two (the shape is learned from the first, once it is
    # complete) was ticketed, dropped, given back and read again.
    assert len(read_again) >= 25 and len(set(read_again)) == len(read_again)


def test_a_trace_whose_clocks_the_batch_would_correct_keeps_its_spans():
    from tracer.analysis.execution.attribute import Attributor

    traces = _traces(3, seed=2)
    attribute = Attributor("stage", None)
    attribute(traces[0][0].trace_id, traces[0], 0, 0)  # its shape is learned
    ticket, drop = attribute.early(traces[1][0].trace_id, traces[1])
    assert ticket and drop  # a ticket: the spans may go
    skewed = traces[2]
    model = next(s for s in skewed if s.service == "model" and s.kind == 2)
    model.start_ns -= 5_000 * MS  # its clock runs behind: outside its caller
    ticket, drop = attribute.early(skewed[0].trace_id, skewed)
    assert ticket and not drop  # the spans stay, for the scalar path


def test_a_file_that_changed_under_a_dropped_trace_is_a_clear_error(tmp_path):
    from tracer._errors import SourceError
    from tracer.analysis.execution.lines import seq, spans_of

    traces = _traces(3, seed=6)
    path = write_otlp_lines(tmp_path / "t.jsonl", traces)
    data = path.read_bytes()
    first = data.index(b"\n") + 1  # the first line: the first trace
    tid = traces[0][0].trace_id
    at = seq(0, 0, 0)
    again = spans_of(str(path), tid, at, first, 11)
    assert sorted(s.span_id for s in again) == sorted(s.span_id for s in traces[0])
    with open(path, "rb") as fh:  # from the open file, its position left alone
        fh.seek(5)
        assert len(spans_of(str(path), tid, at, first, 11, fh)) == 11
        assert fh.tell() == 5
    path.write_bytes(data[first:])  # rotated: another trace's line is there now
    with pytest.raises(SourceError, match="changed while it was read: trace .* 11 spans"):
        spans_of(str(path), tid, at, first, 11)
    path.unlink()
    with pytest.raises(SourceError, match="cannot read"):
        spans_of(str(path), tid, at, first, 11)


def test_input_where_dropped_parts_keep_coming_back_stops_dropping_them(tmp_path, monkeypatch):
    """Every trace cut across two lines, its first part of a known shape: each dropped
    part would be read again. After 64 such reads (over 2% of the parts dropped) the
    range keeps spans instead; a part without the trace's root is never dropped."""
    import tracer.analysis.execution.stream as stream

    traces = _traces(300, seed=12)
    lines = [_short(t) for t in traces[:6]]  # the short shape, learned
    for t in traces[6:]:
        lines += [_short(t), [s for s in t if s.service == "model"]]
    path = write_otlp_lines(tmp_path / "cut.jsonl", lines)
    read_again = _reads(monkeypatch, stream)
    whole = analysis_dict(analyze(load([path])))
    assert analysis_dict(analyze_files([path], "stage", None, 1, window=20)) == whole
    assert len(read_again) == stream._RESTORES + 1  # then no more


def test_a_subtree_read_before_its_callers_keeps_its_spans(tmp_path, monkeypatch):
    """Calls made to the model server directly are whole traces of the model's subtree
    shape; a chain trace's model spans, read before the rest of it, look the same but
    their top span has a parent: they are not dropped (their trace surely goes on)."""
    import msgspec

    import tracer.analysis.execution.stream as stream

    traces = _traces(12, seed=13)
    direct = []
    for n, t in enumerate(traces[:6]):
        model = [s for s in t if s.service == "model"]
        tid = f"{0xD0 + n:032x}"
        direct.append(
            [
                msgspec.structs.replace(
                    s, trace_id=tid, parent_id=None if s.kind == 2 else s.parent_id
                )
                for s in model
            ]
        )
    lines = list(direct)
    for t in traces[6:]:
        lines += [[s for s in t if s.service == "model"], _short(t)]
    path = write_otlp_lines(tmp_path / "subtree.jsonl", lines)
    read_again = _reads(monkeypatch, stream)
    whole = analysis_dict(analyze(load([path])))
    assert analysis_dict(analyze_files([path], "stage", None, 1, window=8)) == whole
    assert read_again == []


def test_shapes_are_learned_from_quiet_traces_before_the_window_passes(tmp_path, monkeypatch):
    """A trace whose shape was unknown when read is looked at again LEARN_AFTER spans
    later: its shape is learned then (it holds its root), and the traces after it are
    ticketed as they are read, long before the first window has passed. A trace whose
    last part comes after that second look (still within the window) is read again and
    whole: the output is the whole-file analysis's."""
    import msgspec

    import tracer.analysis.execution.attribute as attribute_module
    import tracer.analysis.execution.stream as stream

    monkeypatch.setattr(stream, "LEARN_AFTER", 30)
    traces = _traces(200, seed=14)
    # Trace 1 is read before any shape is known; one more span of it (exported late)
    # comes 10 lines later, after its second look ticketed it and dropped its spans.
    extra = msgspec.structs.replace(traces[1][-1], span_id="f" * 16)
    # Trace 50 comes in two parts; its first part alone teaches a shape of its own.
    lines = [[s for s in t if s.service != "model"] if i == 50 else t for i, t in enumerate(traces)]
    lines.insert(60, [s for s in traces[50] if s.service == "model"])
    lines.insert(11, [extra])
    path = write_otlp_lines(tmp_path / "quiet.jsonl", lines)
    taken = {"line": 0, "second look": 0}
    early = attribute_module.Attributor.early

    def spy(self, trace_id, spans, learn=False):
        ticket, drop = early(self, trace_id, spans, learn)
        if drop:
            taken["second look" if learn else "line"] += 1
        return ticket, drop

    monkeypatch.setattr(attribute_module.Attributor, "early", spy)
    read_again = _reads(monkeypatch, stream)
    whole = analysis_dict(analyze(load([path])))
    assert analysis_dict(analyze_files([path], "stage", None, 1, window=1000)) == whole
    assert taken["second look"] >= 1  # learned early, so ...
    assert taken["line"] >= 190  # ... almost every trace was ticketed as it was read
    assert read_again == [traces[1][0].trace_id]  # its part came after the second look
