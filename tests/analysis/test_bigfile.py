"""The parallel path for large OTLP JSON-lines files gives the serial path's numbers."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from tests.helpers import hoptrace
from tests.synthetic import SEED_MS, chain_trace, to_otlp_json
from tracer._errors import NoUsableDataError
from tracer.analysis import analyze, load
from tracer.analysis.execution.bigfile import analyze_files, eligible
from tracer.analysis.query import Query
from tracer.analysis.render import analysis_dict

T0 = 1_700_000_000_000_000_000
MS = 1_000_000


def _split_file(path: Path, traces: int = 60) -> Path:
    """Each trace's client and gateway spans in the first half of the file, its app and
    model spans in the second half, as batches from different services arrive."""
    early, late = [], []
    for i in range(traces):
        ms = {**SEED_MS, "inference": 700.0 + 13 * i, "auth": 50.0 + (i % 5) * 30}
        spans = chain_trace(f"{i + 1:032x}", T0 + i * 5000 * MS, ms, model_ttft_ms=120.0)
        root = next(s for s in spans if s.parent_id is None)
        root.attributes["hoptrace.run"] = "even" if i % 2 == 0 else "odd"
        front = [s for s in spans if s.service in ("client", "gateway")]
        back = [s for s in spans if s.service not in ("client", "gateway")]
        early.append(orjson.dumps(to_otlp_json(front)))
        late.append(orjson.dumps(to_otlp_json(back)))
    path.write_bytes(b"\n".join(early + [b"not json at all", b'{"other": 1}'] + late) + b"\n")
    return path


@pytest.mark.parametrize("workers", [2, 3])
def test_split_traces_are_joined_and_numbers_match_serial(tmp_path, workers):
    path = _split_file(tmp_path / "split.jsonl")
    serial = analyze(load([path]))
    parallel = analyze_files([path], Query(workers=workers))
    assert parallel.traces == serial.traces == 60
    assert analysis_dict(parallel) == analysis_dict(serial)
    # The bad lines were counted, not lost.
    assert parallel.warnings.messages and serial.warnings.messages
    assert any("not JSON" in m for m in parallel.warnings.messages)


def test_progress_counts_every_partition_up_to_the_total(tmp_path):
    # The first partition is read by this process, the others by workers: the bytes
    # shown count them all, never go back, and end at the total before attributing.
    path = _split_file(tmp_path / "split.jsonl", traces=200)
    calls: list[tuple[str, int, int]] = []
    got = analyze_files(
        [path], Query(workers=3, window_spans=5), progress=lambda *call: calls.append(call)
    )
    assert got.traces == 200
    reading = [done for phase, done, _ in calls if phase == "reading"]
    assert reading == sorted(reading)
    assert reading[-1] == path.stat().st_size
    assert calls[-1][0] == "attributing"


def test_a_failing_worker_is_one_clear_error(tmp_path, monkeypatch):
    import tracer.analysis.execution.bigfile as bigfile
    from tracer._errors import HoptraceError

    path = _split_file(tmp_path / "split.jsonl")
    parent, real = os.getpid(), bigfile._partition

    def partition(*args, **kwargs):
        if os.getpid() != parent:  # in a forked worker only
            raise MemoryError("no room")
        return real(*args, **kwargs)

    monkeypatch.setattr(bigfile, "_partition", partition)
    with pytest.raises(HoptraceError, match="an analysis worker failed: MemoryError: no room"):
        analyze_files([path], Query(workers=2))


def test_filters_apply_to_whole_traces(tmp_path):
    path = _split_file(tmp_path / "split.jsonl")
    for kwargs in ({"run": "even"}, {"service": "model"}, {"operation": "nope"}):
        traces = load([path], Query(**kwargs))
        if not traces.traces:
            with pytest.raises(NoUsableDataError, match="no trace"):
                analyze_files([path], Query(workers=2, **kwargs))
            continue
        assert analysis_dict(analyze_files([path], Query(workers=2, **kwargs))) == analysis_dict(
            analyze(traces)
        )


def test_only_large_otlp_lines_files_are_eligible(tmp_path, monkeypatch):
    path = _split_file(tmp_path / "split.jsonl")
    assert not eligible([path])  # small
    monkeypatch.setenv("HOPTRACE_PARALLEL_MIN_BYTES", "1")
    assert eligible([path])
    jaeger = tmp_path / "j.json"
    jaeger.write_text('{"data": []}')
    assert not eligible([path, jaeger])
    assert not eligible([tmp_path])
    # Told by the content, not the name: a Collector file rotated to "traces.1" or cut
    # into "part00" streams too (it was loaded whole, 3.4 GB for 5M spans).
    bare = path.rename(tmp_path / "part00")
    assert eligible([bare])
    assert not eligible([bare, jaeger.rename(tmp_path / "part01")])


def test_a_file_without_a_suffix_is_streamed_in_bounded_memory(tmp_path, monkeypatch):
    import tracer.analysis.execution.bigfile as bigfile
    from tracer.analysis import analyze_sources, load

    path = _split_file(tmp_path / "split.jsonl").rename(tmp_path / "traces.1")
    streamed = []
    real = bigfile.analyze_files
    monkeypatch.setattr(
        bigfile, "analyze_files", lambda *a, **k: streamed.append(1) or real(*a, **k)
    )
    result, _ = analyze_sources([str(path)], Query(workers=1))
    assert streamed == [1]
    assert analysis_dict(result) == analysis_dict(analyze(load([path])))


def test_cli_takes_the_parallel_path_with_the_same_output(tmp_path):
    path = _split_file(tmp_path / "split.jsonl")
    outputs = []
    for workers in ("1", "2"):
        env = dict(os.environ, HOPTRACE_WORKERS=workers, HOPTRACE_PARALLEL_MIN_BYTES="1")
        done = hoptrace("analyze", str(path), "--format", "json", env=env)
        assert done.returncode == 0, done.stderr
        outputs.append(orjson.loads(done.stdout))
    assert outputs[0] == outputs[1]
    assert outputs[0]["traces"] == 60
    bad = hoptrace("analyze", str(path), env=dict(os.environ, HOPTRACE_WORKERS="zero"))
    assert bad.returncode == 2 and "HOPTRACE_WORKERS must be a positive integer" in bad.stderr


def test_compare_takes_the_parallel_path_with_the_same_output(tmp_path):
    path = _split_file(tmp_path / "split.jsonl")
    other = _split_file(tmp_path / "other.jsonl", traces=30)
    outputs = []
    for workers in ("1", "2"):
        env = dict(os.environ, HOPTRACE_WORKERS=workers, HOPTRACE_PARALLEL_MIN_BYTES="1")
        done = hoptrace("compare", str(path), str(other), "--format", "json", env=env)
        assert done.returncode == 0, done.stderr
        outputs.append(orjson.loads(done.stdout))
    assert outputs[0] == outputs[1]
    assert outputs[0]["baseline"]["traces"] == 60 and outputs[0]["candidate"]["traces"] == 30


def test_a_worker_that_dies_while_its_table_crosses_is_one_clear_error(tmp_path, monkeypatch):
    import tracer.analysis.execution.bigfile as bigfile
    from tracer._errors import HoptraceError

    path = _split_file(tmp_path / "split.jsonl")

    def send_half(conn, table, *before):
        class Cut:  # the pipe closes after the first array: the worker is gone
            def __init__(self) -> None:
                self.sent = 0

            def send(self, message):
                conn.send(message)

            def send_bytes(self, buf):
                if self.sent:
                    os._exit(1)
                self.sent += 1
                conn.send_bytes(buf)

        real_send(Cut(), table, *before)

    real_send = bigfile.send_table
    monkeypatch.setattr(bigfile, "send_table", send_half)
    with pytest.raises(HoptraceError, match="an analysis worker process died"):
        analyze_files([path], Query(workers=2))
