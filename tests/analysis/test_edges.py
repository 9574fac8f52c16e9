"""Analyzer corner cases: skew against streams, standard input and pipes, folders with
foreign files, store rows that cannot be used, conflicting duplicate spans."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import orjson
import pytest

from collector.store import SpanStore
from tests.helpers import hoptrace
from tests.synthetic import SEED_MS, chain_trace, to_otlp_json
from tracer.analysis import TraceSet, analyze, load
from tracer.spans.model import KIND_CLIENT, KIND_SERVER, Span

T0 = 1_700_000_000_000_000_000
MS = 1_000_000


def _span(tid, sid, parent, service, start_ms, end_ms, stage=None, kind=0, name=None):
    return Span(tid, sid, parent, service, name or sid, kind, T0 + int(start_ms * MS),
                T0 + int(end_ms * MS), stage, 0, None, {})  # fmt: skip


def _one(spans: list[Span]):
    ts = TraceSet()
    ts.add(spans)
    return analyze(ts)


def test_a_shorter_remote_child_shifted_late_is_skew_centred_not_a_stream():
    # The CLIENT span lasts 80 ms; the server's 60 ms of work shows up at 50..110 (its
    # clock 40 ms ahead): it starts inside and ends after, but is shorter, so it is
    # clock skew: centred in the parent, not taken as a stream.
    tid = "a" * 32
    result = _one([
        _span(tid, "r", None, "client", 0, 100, stage="client"),
        _span(tid, "c", "r", "client", 10, 90, kind=KIND_CLIENT),
        _span(tid, "s", "c", "server", 50, 110, stage="gateway", kind=KIND_SERVER),
    ])  # fmt: skip
    groups = {g.name: g.mean_ms for g in result.groups}
    assert result.warnings.skew_adjusted == 1
    assert result.e2e.p50 == pytest.approx(100.0)
    # All 60 ms of the server's work stay on the critical path; network is 80 - 60.
    assert groups == pytest.approx({"client": 20.0, "network": 20.0, "gateway": 60.0})


def test_a_longer_remote_child_that_starts_inside_is_a_stream_and_widens_the_client_span():
    tid = "b" * 32
    result = _one([
        _span(tid, "r", None, "client", 0, 1000, stage="client"),
        _span(tid, "c", "r", "client", 10, 60, kind=KIND_CLIENT),
        _span(tid, "s", "c", "server", 20, 990, stage="inference", kind=KIND_SERVER),
    ])  # fmt: skip
    groups = {g.name: g.mean_ms for g in result.groups}
    assert result.warnings.skew_adjusted == 0
    assert groups == pytest.approx({"client": 20.0, "network": 10.0, "inference": 970.0})


@pytest.fixture
def seed_lines() -> bytes:
    return b"\n".join(
        orjson.dumps(to_otlp_json(chain_trace(f"{i:032x}", T0 + i * 5000 * MS, SEED_MS)))
        for i in range(1, 13)
    )


def test_dash_reads_standard_input(seed_lines):
    done = subprocess.run(
        [sys.executable, "-m", "tracer.cli", "analyze", "-", "--format", "json"],
        input=seed_lines,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["traces"] == 12


def test_a_pipe_path_is_read_once_and_fully(seed_lines, tmp_path):
    path = tmp_path / "seed.jsonl"
    path.write_bytes(seed_lines)
    # bash's <(cat f) hands the command a /dev/fd pipe, as a user's shell does.
    done = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -m tracer.cli analyze <(cat "{path}") --format json'],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["traces"] == 12


def test_a_folder_with_a_foreign_sqlite_file_skips_it_with_a_warning(seed_lines, tmp_path):
    (tmp_path / "seed.jsonl").write_bytes(seed_lines)
    with sqlite3.connect(tmp_path / "other.db") as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    (tmp_path / "broken.json").write_text('{"resourceSpans": [')
    traces = load([tmp_path])
    assert len(traces.traces) == 12
    messages = " ".join(traces.warnings.messages)
    assert "other.db" in messages and "not a hoptrace span store" in messages
    assert "broken.json" in messages


def test_store_rows_that_cannot_be_used_are_skipped_and_counted(tmp_path):
    path = tmp_path / "s.db"
    spans = chain_trace("c" * 32, T0, SEED_MS)
    with SpanStore(path, create=True) as store:
        store.write(spans)
    with sqlite3.connect(path) as conn:
        ids = [r[0] for r in conn.execute("SELECT span_id FROM spans ORDER BY start_ns")]
        (table,) = conn.execute("SELECT name FROM partitions").fetchone()  # the one partition
        for rowid, body in conn.execute(f"SELECT rowid, body FROM {table}").fetchall():
            group = orjson.loads(body)
            for span in group:
                if span[1] == ids[-1]:
                    span[11] = [1]  # attributes that are not an object
                if span[1] == ids[-2]:
                    span[7] = span[6] - 5  # an end before its start
            conn.execute(
                f"UPDATE {table} SET body = ? WHERE rowid = ?", (orjson.dumps(group), rowid)
            )
    traces = load([path])
    assert traces.span_count == len(spans) - 2
    assert traces.warnings.skipped_spans == 2
    assert any("not a JSON object" in m for m in traces.warnings.messages)
    assert any("end before they start" in m for m in traces.warnings.messages)
    done = hoptrace("analyze", str(path), "--format", "json")
    assert done.returncode == 0 and "Traceback" not in done.stderr
    assert orjson.loads(done.stdout)["warnings"]["skipped_spans"] == 2


def test_a_span_id_reused_with_other_content_is_counted_exact_copies_are_not():
    spans = chain_trace("d" * 32, T0, SEED_MS)
    copy = spans[3]
    clash = Span(copy.trace_id, copy.span_id, copy.parent_id, copy.service, "other name",
                 copy.kind, copy.start_ns, copy.end_ns + MS)  # fmt: skip
    result = _one([*spans, copy, clash])
    assert result.warnings.duplicates == 1
    assert result.e2e.p50 == pytest.approx(sum(SEED_MS.values()))
