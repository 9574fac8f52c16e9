"""The store's layout: stores from before partitions, and reads by time, run and id
that go through the indexes and give what a read of everything would."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from fnmatch import fnmatchcase

import pytest

from collector import SpanStore
from collector.store import span_row
from tests.conftest import CollectorProcess
from tests.helpers import hoptrace
from tracer import attributes as attrs
from tracer.spans.model import Span

OLD_SCHEMA = """CREATE TABLE spans (trace_id TEXT NOT NULL, span_id TEXT NOT NULL,
    parent_id TEXT, service TEXT NOT NULL, name TEXT NOT NULL, kind INTEGER NOT NULL,
    start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, stage TEXT, status INTEGER NOT NULL,
    first_token_ns INTEGER, attributes BLOB NOT NULL{extra})"""
T0 = 1_700_000_000_000_000_000


def _trace(n: int, start_ns: int, run: str | None = None, spans: int = 3) -> list[Span]:
    trace_id = f"{n:032x}"
    root_attrs = {attrs.STAGE: "client", **({attrs.RUN: run} if run else {})}
    out = [
        Span(
            trace_id,
            f"{n:08x}00000001",
            None,
            "client",
            "root",
            2,
            start_ns,
            start_ns + 10_000_000,
            "client",
            1,
            None,
            root_attrs,
        )
    ]
    for i in range(1, spans):
        out.append(
            Span(
                trace_id,
                f"{n:08x}{i + 1:08x}",
                out[0].span_id,
                "model",
                "infer",
                1,
                start_ns + i * 1_000,
                start_ns + 9_000_000,
                "inference",
                1,
                None,
                {attrs.STAGE: "inference"},
            )
        )
    return out


def _old_store(path, traces: list[list[Span]], trace_state: bool = True) -> None:
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(OLD_SCHEMA.format(extra=", trace_state TEXT" if trace_state else ""))
        width = 13 if trace_state else 12
        db.executemany(
            f"INSERT INTO spans VALUES ({','.join('?' * width)})",
            [span_row(s)[:width] for spans in traces for s in spans],
        )


def _analyze(store) -> dict:
    result = hoptrace("analyze", str(store), "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.integration
@pytest.mark.parametrize("trace_state", [True, False])
def test_a_store_from_before_is_read_as_it_is_then_migrated_once_with_one_line(
    tmp_path, trace_state
):
    store = tmp_path / "old.db"
    traces = [_trace(n, T0 + n * 10**9, run="a" if n % 2 else "b") for n in range(1, 41)]
    _old_store(store, traces, trace_state)
    before = _analyze(store)
    runs_before = hoptrace("runs", str(store), "--format", "json")
    assert before["traces"] == 40 and runs_before.returncode == 0

    proc = CollectorProcess(store, "--no-live-metrics")
    try:
        health = proc.health()
    finally:
        proc.stop()
    said = [line for line in proc.proc.stderr.read().splitlines() if "earlier version" in line]
    assert len(said) == 1 and "120 spans" in said[0]
    assert health["store_partitions"] == 1 and health["store_oldest_span_ns"] == T0 + 10**9

    after = _analyze(store)
    assert after == before
    runs_after = hoptrace("runs", str(store), "--format", "json")
    assert json.loads(runs_after.stdout) == json.loads(runs_before.stdout)
    with sqlite3.connect(store) as db:
        plan = " ".join(
            str(row)
            for row in db.execute(
                "EXPLAIN QUERY PLAN SELECT * FROM spans_000000 WHERE trace_id = ?", ("x",)
            )
        )
    assert "USING INDEX spans_000000_by_trace" in plan
    with SpanStore(store, read_only=True) as read:
        assert [s.span_id for s in read.spans_of([f"{7:032x}"])] == [s.span_id for s in traces[6]]
    again = CollectorProcess(store, "--no-live-metrics")  # once: the second start says nothing
    again.stop()
    assert "earlier version" not in again.proc.stderr.read()


def _partitioned_store(path) -> list[list[Span]]:
    """Traces over four partitions; trace 5 is split over the first two, one of its spans
    starting before everything else."""
    traces = [_trace(n, T0 + n * 10**9, run=f"bench-{n % 3}") for n in range(1, 41)]
    straddler = _trace(5, T0 + 5 * 10**9, run="bench-2")
    traces[4] = straddler
    early = Span(straddler[0].trace_id, "ffffffff00000009", straddler[0].span_id, "model",
                 "late", 1, T0 - 10**9, T0, None, 1, None, {})  # fmt: skip
    ten = traces[9][0]  # trace 10 ends the first partition; a span of it starts later
    late = Span(ten.trace_id, "eeeeeeee00000009", ten.span_id, "model", "late", 1,
                T0 + 11 * 10**9, T0 + 12 * 10**9, None, 1, None, {})  # fmt: skip
    with SpanStore(path, create=True) as store:
        for part in range(4):
            chunk = [s for spans in traces[part * 10 : part * 10 + 10] for s in spans]
            if part == 1:
                chunk += [early, late]  # spans of traces 5 and 10 that came later
            store.write(chunk)
            store.maintain(now_ns=2**62 + part * 10**13)
    traces[4] = [*straddler, early]
    traces[9] = [*traces[9], late]
    return traces


def _read(store, **kw) -> dict[str, list[str]]:
    got: dict[str, list[str]] = {}
    for _, span in store.iter_trace_rows(chunk=7, **kw):
        got.setdefault(span.trace_id, []).append(span.span_id)
    return got


def test_reads_from_a_time_and_of_a_run_give_what_reading_everything_would(tmp_path):
    path = tmp_path / "s.db"
    traces = _partitioned_store(path)
    with SpanStore(path, read_only=True) as store:
        every = _read(store)
        assert len(every) == 40 and Counter(map(len, every.values())) == {3: 38, 4: 2}
        for since_s in (0, 3, 5, 10.5, 12, 25, 39):
            since_ns = T0 + int(since_s * 10**9)
            want = {
                spans[0].trace_id: sorted(s.span_id for s in spans)
                for spans in traces
                if min(s.start_ns for s in spans) >= since_ns
            }
            got = {t: sorted(ids) for t, ids in _read(store, since_ns=since_ns).items()}
            assert got == want, since_s
        for pattern in ("bench-1", "bench-[02]", "nothing*"):
            want = {
                spans[0].trace_id: sorted(s.span_id for s in spans)
                for spans in traces
                if any(fnmatchcase(s.attributes.get(attrs.RUN, ""), pattern) for s in spans)
            }
            got = {t: sorted(ids) for t, ids in _read(store, run=pattern).items()}
            assert got == want, pattern
        ids = [f"{n:032x}" for n in (5, 17, 40)]
        assert sorted(s.span_id for s in store.spans_of(ids)) == sorted(
            s.span_id for spans in traces if spans[0].trace_id in ids for s in spans
        )


def test_runs_of_a_store_read_a_trace_at_a_time_match_runs_of_its_traces_loaded(tmp_path):
    from tracer.analysis import load, render
    from tracer.analysis.runs import list_runs

    path = tmp_path / "s.db"
    _partitioned_store(path)
    streamed = hoptrace("runs", str(path), "--format", "json")
    assert streamed.returncode == 0, streamed.stderr
    loaded = render.runs_dict(list_runs(load([str(path)])))
    assert json.loads(streamed.stdout) == json.loads(render.dumps(loaded))
    assert [r["label"] for r in loaded] == ["bench-2", "bench-1", "bench-0"]  # trace 5 first
    one = hoptrace("runs", str(path), "--run", "bench-2", "--format", "json")
    assert [(r["label"], r["traces"]) for r in json.loads(one.stdout)] == [("bench-2", 13)]


def _bodies(path) -> list[tuple[int, list]]:
    """(rowid, spans) of each group of the one packed partition of the store at ``path``."""
    with sqlite3.connect(path) as db:
        (table,) = db.execute("SELECT name FROM partitions").fetchone()
        return [(r, json.loads(b)) for r, b in db.execute(f"SELECT rowid, body FROM {table}")]


def test_a_batch_is_packed_a_row_per_trace_and_run_and_read_back_as_written(tmp_path):
    path = tmp_path / "s.db"
    big = _trace(1, T0, run="a", spans=40)  # more spans than one row holds
    two_runs = _trace(2, T0, run="a")
    two_runs[1].attributes[attrs.RUN] = "b"  # one trace, two runs: a row for each
    plain = _trace(3, T0)
    interleaved = zip(big, two_runs + [None] * 37, plain + [None] * 37, strict=True)
    batch = [s for trio in interleaved for s in trio if s]
    with SpanStore(path, create=True) as store:
        assert store.write(batch) == 46
        assert store.count() == 46
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT trace_id, run, spans, length(body), start_ns, last_start_ns "
            "FROM spans_000001 ORDER BY rowid"
        ).fetchall()
        view = db.execute("SELECT trace_id, span_id, attributes, run FROM spans").fetchall()
    ones, twos, threes = ([r for r in rows if r[0] == f"{n:032x}"] for n in (1, 2, 3))
    # At most 3/8 of a page of 16 KiB each (6144 bytes): 39 spans, then the last.
    assert [(r[1], r[2]) for r in ones] == [("a", 39), (None, 1)]
    assert max(r[3] for r in ones) <= 6144 < max(r[3] for r in ones) + 160
    assert [(r[1], r[2]) for r in twos] == [("a", 1), ("b", 2)]
    assert [(r[1], r[2], r[4], r[5]) for r in threes] == [(None, 3, T0, T0 + 2_000)]
    assert len(view) == 46 and view[0][:2] == (f"{1:032x}", big[0].span_id)
    assert json.loads(view[0][2]) == big[0].attributes and view[0][3] == "a"
    with SpanStore(path, read_only=True) as store:
        got = {
            t: [s for s in spans] for t, spans in ((s[0].trace_id, s) for _, s in store.traces())
        }
        assert got == {f"{n:032x}": t for n, t in ((1, big), (2, two_runs), (3, plain))}
        assert [s.span_id for s in store.spans_of([f"{2:032x}"])] == [s.span_id for s in two_runs]
        only_b = [s[0].trace_id for _, s in store.traces(run="b")]
        assert only_b == [f"{2:032x}"]


@pytest.mark.parametrize(
    ("tamper", "kept", "said"),
    [
        (lambda g: b"[[not json", 0, "store rows whose spans are not JSON were skipped"),
        (lambda g: json.dumps([g[0], 7, g[2]]).encode(), 2, "store rows that are not spans were skipped"),
        (lambda g: json.dumps([{**dict(enumerate(g[0]))}, g[1], g[2]]).encode(), 2,
         "store rows that are not spans were skipped"),
        (lambda g: json.dumps([[*g[0][:5], "x", *g[0][6:]], g[1], g[2]]).encode(), 2,
         "store rows with a field of the wrong type were skipped"),
        (lambda g: json.dumps([[*g[0][:7], g[0][6] - 1, *g[0][8:]], g[1], g[2]]).encode(), 2,
         "store rows that end before they start were skipped"),
        (lambda g: json.dumps([[*g[0][:1], "", *g[0][2:]], g[1], g[2]]).encode(), 2,
         "store rows without ids or times were skipped"),
        (lambda g: json.dumps([[*g[0][:6], -1, *g[0][7:]], g[1], g[2]]).encode(), 2,
         "spans with times outside 1970..2200 were skipped"),
    ],
)  # fmt: skip
def test_a_tampered_group_keeps_what_can_be_read_and_says_why_in_one_line(
    tmp_path, tamper, kept, said
):
    path = tmp_path / "s.db"
    with SpanStore(path, create=True) as store:
        store.write([s for n in range(1, 4) for s in _trace(n, T0 + n * 10**9)])
    (rowid, group), *_ = _bodies(path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE spans_000001 SET body = ? WHERE rowid = ?", (tamper(group), rowid))
    with SpanStore(path, read_only=True) as store:
        from tracer.spans.model import Warnings

        tally = Warnings()
        got = [s for _, s in store.iter_trace_rows(warnings=tally)]
    assert len(got) == 6 + kept and tally.skipped_spans == 3 - kept
    assert tally.messages == [said]
    done = hoptrace("analyze", str(path), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert json.loads(done.stdout)["warnings"]["skipped_spans"] == 3 - kept


def test_partitions_of_a_row_per_span_are_read_and_dropped_beside_packed_ones(tmp_path):
    from collector.partitions import drop_partition, list_partitions

    path = tmp_path / "old.db"
    old = [_trace(n, T0 + n * 10**9, run="r") for n in range(1, 6)]
    _old_store(path, old)
    straggler = Span(old[0][0].trace_id, "dddddddd00000009", old[0][0].span_id, "model",
                     "late", 1, T0 + 2 * 10**9, T0 + 3 * 10**9, None, 1, None, {})  # fmt: skip
    new = [_trace(n, T0 + n * 10**9, run="r") for n in range(6, 9)]
    with SpanStore(path) as store:  # migrated: partition 0 keeps a row per span
        store.write([straggler, *(s for t in new for s in t)])
        assert store.count() == 25
    with SpanStore(path, read_only=True) as store:
        got = [(s[0].trace_id, [x.span_id for x in s]) for _, s in store.traces()]
    want = [(t[0].trace_id, [s.span_id for s in t]) for t in [[*old[0], straggler], *old[1:], *new]]
    assert got == want
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM spans").fetchone() == (25,)
        assert db.execute("SELECT body IS NULL FROM spans_000001 LIMIT 1").fetchone() == (0,)
        parts = list_partitions(db)
        assert drop_partition(db, parts[0], parts[1:]) == (15, 1)
        assert db.execute("SELECT spans FROM partitions").fetchall() == [(9,)]
        assert db.execute("SELECT COUNT(*) FROM spans").fetchone() == (9,)
    with SpanStore(path, read_only=True) as store:
        assert store.count() == 9
        assert [s[0].trace_id for _, s in store.traces()] == [t[0].trace_id for t in new]
