"""Retention of a running collector: by size and by age, whole traces only, the
options and their environment twins, and what /healthz and /metrics report."""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from pathlib import Path

import httpx
import orjson
import pytest

from collector import Retention, SpanStore
from tests.collector.payloads import SPANS_PER_TRACE, Bodies, rows_of
from tests.conftest import CollectorProcess
from tests.helpers import eventually, hoptrace

PROTO = {"content-type": "application/x-protobuf"}
MiB = 1024 * 1024
#: Batches of about 100 kB sent to a store limited to 2 MiB.
BATCHES = 60


def _json_trace(trace_id: str, first: int, count: int, start_ns: int) -> bytes:
    """An OTLP JSON body with spans ``first .. first+count-1`` of one trace."""
    spans = [
        {
            "traceId": trace_id,
            "spanId": f"{i + 1:016x}",
            **({"parentSpanId": f"{1:016x}"} if i else {}),
            "name": f"op{i}",
            "kind": 2,
            "startTimeUnixNano": str(start_ns + i * 1000),
            "endTimeUnixNano": str(start_ns + i * 1000 + 500),
        }
        for i in range(first, first + count)
    ]
    return orjson.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {
                        "attributes": [{"key": "service.name", "value": {"stringValue": "s"}}]
                    },
                    "scopeSpans": [{"spans": spans}],
                }
            ]
        }
    )


def _post(url: str, body: bytes, ctype: str = "application/x-protobuf") -> None:
    response = httpx.post(url, content=body, headers={"content-type": ctype}, timeout=30)
    assert response.status_code == 200, response.text


def _spans_by_trace(store: Path) -> Counter:
    with sqlite3.connect(store) as db:
        return Counter(t for (t,) in db.execute("SELECT trace_id FROM spans"))


@pytest.mark.integration
def test_a_size_limit_keeps_the_store_within_it_and_drops_the_oldest_traces_whole(tmp_path):
    store = tmp_path / "spans.db"
    limit = 2 * MiB
    proc = CollectorProcess(store, "--max-store-size", "2MiB", "--no-live-metrics")
    bodies = Bodies(100_000)
    url = proc.endpoint + "/v1/traces"
    straddler = "ab" * 16
    try:
        _post(url, _json_trace(straddler, 0, 4, 1_700_000_000_000_000_000), "application/json")
        sizes = []
        for number in range(BATCHES):  # ~ 5x the limit
            _post(url, bodies.stamp(number))
            if number == 3:  # after the first partition closed: its other half lands later
                _post(
                    url,
                    _json_trace(straddler, 4, 4, 1_700_000_000_000_000_000),
                    "application/json",
                )
            sizes.append(proc.health()["store_file_bytes"])
        health = proc.health()
    finally:
        proc.stop()
    assert proc.proc.returncode == 0
    assert health["retention_partitions_removed"] > 0
    assert health["retention_max_bytes"] == limit
    # Within the limit plus one partition (a sixteenth) and one batch's pages.
    assert max(sizes) <= limit * (1 + 1 / 16) + bodies.size, max(sizes)
    counts = _spans_by_trace(store)
    assert straddler not in counts  # dropped whole, its late half too
    numbers = {Bodies.number_of(t) for t in counts}
    assert set(counts.values()) == {SPANS_PER_TRACE}  # no trace is left in part
    assert max(numbers) == BATCHES - 1 and min(numbers) > 0  # the newest kept, oldest gone
    assert numbers == set(range(min(numbers), BATCHES))  # oldest first: no gap


@pytest.mark.integration
def test_an_age_limit_drops_what_arrived_longer_ago_and_keeps_the_rest(tmp_path):
    store = tmp_path / "spans.db"
    proc = CollectorProcess(store, "--retention", "3s")
    url = proc.endpoint + "/v1/traces"
    old, new = "01" * 16, "02" * 16
    try:
        _post(url, _json_trace(old, 0, 3, 1_700_000_000_000_000_000), "application/json")
        health = eventually(proc.health, lambda h: h["retention_spans_removed"] >= 3, 30)
        _post(url, _json_trace(new, 0, 3, 1_700_000_000_000_000_000), "application/json")
        metrics = httpx.get(proc.endpoint + "/metrics").text
    finally:
        proc.stop()
    assert health["retention_max_age_s"] == 3
    assert health["retention_partitions_removed"] >= 1
    assert _spans_by_trace(store) == {new: 3}
    assert "hoptrace_collector_retention_spans_removed_total 3.0" in metrics
    assert "hoptrace_collector_store_bytes " in metrics


def test_bad_retention_or_size_is_one_line_and_a_non_zero_exit(tmp_path):
    for args, env, said in (
        (["--retention", "banana"], {}, "--retention must be a duration"),
        (["--max-store-size", "lots"], {}, "--max-store-size must be a size"),
        (["--retention", "0s"], {}, "--retention must be longer than 0"),
        ([], {"HOPTRACE_RETENTION": "-1d"}, "HOPTRACE_RETENTION must be a duration"),
        ([], {"HOPTRACE_MAX_STORE_SIZE": "0"}, "HOPTRACE_MAX_STORE_SIZE must be larger"),
    ):
        result = hoptrace(
            "collect", "--port", "1", "--store", str(tmp_path / "s.db"), *args,
            env={**os.environ, **env},
        )  # fmt: skip
        assert result.returncode != 0
        assert said in result.stderr and "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.integration
def test_the_keyword_wins_over_the_environment_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("HOPTRACE_RETENTION", "banana")
    monkeypatch.setenv("HOPTRACE_MAX_STORE_SIZE", "1GiB")
    proc = CollectorProcess(tmp_path / "s.db", "--retention", "2h")
    try:
        health = proc.health()
    finally:
        proc.stop()
    assert health["retention_max_age_s"] == 7200
    assert health["retention_max_bytes"] == 1024 * MiB


def test_a_store_reads_the_same_while_retention_drops_what_it_is_reading(tmp_path):
    path = tmp_path / "s.db"
    bodies = Bodies(20_000)
    with SpanStore(path, create=True) as writer:
        for number in range(6):
            writer.write_rows(rows_of(bodies.stamp(number)))
            writer.maintain(now_ns=2**62 + number * 10**13)  # a partition per batch
        with SpanStore(path, read_only=True) as reader:
            reading = reader.iter_trace_rows(chunk=50)
            first = [next(reading)[1] for _ in range(10)]
            writer.retention = Retention(max_age_s=1.0)
            writer.maintain(now_ns=2**62 + 10**16)  # everything is old now
            assert writer.removed.partitions_removed >= 5
            rest = [span for _, span in reading]
        with SpanStore(path, read_only=True) as after:
            left = Counter(s.trace_id for s in after.iter_spans())
    seen = Counter(s.trace_id for s in first + rest)
    assert len(seen) == 6 * bodies.spans // SPANS_PER_TRACE  # the snapshot, whole
    assert set(seen.values()) == {SPANS_PER_TRACE}
    assert not left


def test_a_trace_split_over_partitions_goes_whole_with_the_oldest(tmp_path):
    bodies = Bodies(20_000)
    split = "cd" * 16
    with SpanStore(tmp_path / "s.db", create=True) as store:
        store.write_rows(rows_of(bodies.stamp(0)))
        store.write_rows(rows_of(bodies.stamp(1))[:1])
        store.maintain(now_ns=2**62)  # closes the first partition
        store.write_rows(rows_of(bodies.stamp(1))[1:] + rows_of(bodies.stamp(2)))
        store.maintain(now_ns=2**62 + 10**13)
        store.write_rows(rows_of(bodies.stamp(3)))
        store.retention = Retention(max_age_s=1.0)
        store.maintain(now_ns=2**62 + 10**13 + 5 * 10**8)  # only the first is old
        left = Counter(s.trace_id for s in store.iter_spans())
    assert store.removed.partitions_removed == 1
    assert set(left.values()) == {SPANS_PER_TRACE}  # the first trace of batch 1 went whole
    assert {Bodies.number_of(t) for t in left} == {1, 2, 3}
    assert len(left) == 3 * bodies.spans // SPANS_PER_TRACE - 1 and split not in left


def test_dropping_a_partition_does_not_write_its_pages_again(tmp_path):
    # Some SQLite builds (Debian's among them) zero every freed page: a dropped partition
    # was written to the log once more, as zeros, while ingest waited for the writer.
    path = tmp_path / "s.db"
    bodies = Bodies(200_000)
    with SpanStore(path, create=True) as store:
        for number in range(10):
            store.write_rows(rows_of(bodies.stamp(number)))
        store.maintain(now_ns=2**62)  # closes the first partition
        store.write_rows(rows_of(bodies.stamp(10)))
        conn = store._conn
        oldest = conn.execute("SELECT name FROM partitions ORDER BY number LIMIT 1").fetchone()[0]
        (pages,) = conn.execute(
            "SELECT COUNT(*) FROM dbstat WHERE name LIKE ? || '%'", (oldest,)
        ).fetchone()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        store.retention = Retention(max_age_s=0.1)
        store.maintain(now_ns=2**62 + 5 * 10**8)  # the first is old, the second is written
        _, logged, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert store.removed.partitions_removed == 1
    assert pages >= 40  # the partition and its indexes
    assert logged < pages / 4, (logged, pages)
