"""Backpressure: a memory limit answered with 503 and Retry-After, 503 when the store
fails, and no work for a client that has gone."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from collector import BackgroundCollector, SpanStore
from collector.memory import DEFAULT_MAX_MEMORY_BYTES, MemoryBudget, MiB, parse_size
from tests.collector import bodies as b
from tests.helpers import eventually, hoptrace
from tracer._errors import ConfigError


class _HeldStore:
    """Makes the collector's store wait inside its next write until released."""

    def __init__(self, collector: BackgroundCollector, monkeypatch: pytest.MonkeyPatch):
        self.entered = threading.Event()
        self.release = threading.Event()
        original = collector.store.write_rows

        def held(rows: list[tuple]) -> int:
            self.entered.set()
            self.release.wait(30)
            return original(rows)

        monkeypatch.setattr(collector.store, "write_rows", held)


@pytest.fixture
def collector(tmp_path) -> Iterator[BackgroundCollector]:
    # Room for one 90 kB protobuf body in flight (about 0.75 MiB), not for two.
    with BackgroundCollector(tmp_path / "s.db", max_body_bytes=100_000, max_memory="1.4MiB") as c:
        yield c


def _post(collector: BackgroundCollector, request, timeout: float = 30) -> httpx.Response:
    return httpx.post(
        collector.endpoint + "/v1/traces",
        content=request.SerializeToString(),
        headers=b.PROTO,
        timeout=timeout,
    )


def _traces(collector: BackgroundCollector) -> set[str]:
    with SpanStore(collector.store.path) as store:
        return {s.trace_id for s in store.iter_spans()}


def _health(collector: BackgroundCollector) -> dict:
    return httpx.get(collector.endpoint + "/healthz").json()


def test_past_max_memory_new_requests_get_503_with_retry_after(collector, monkeypatch):
    held = _HeldStore(collector, monkeypatch)
    first, second = b.proto_request(5, pad_bytes=90_000), b.proto_request(5, pad_bytes=90_000)
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(_post, collector, first)
        assert held.entered.wait(10)
        refused = _post(collector, second)
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "1"
        assert "memory limit" in refused.json()["message"]
        held.release.set()
        assert pending.result().status_code == 200
    assert _post(collector, second).status_code == 200  # the exporter's retry
    trace = lambda r: r.resource_spans[0].scope_spans[0].spans[0].trace_id.hex()  # noqa: E731
    assert _traces(collector) == {trace(first), trace(second)}
    health = _health(collector)
    assert health["requests_refused"] == 1 and health["in_flight_bytes"] == 0


def test_store_failure_answers_503_and_the_retry_is_stored_in_full(collector, monkeypatch):
    original = collector.store.write_rows
    failures = iter([sqlite3.OperationalError("disk I/O error")])

    def failing(rows: list[tuple]) -> int:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return original(rows)

    monkeypatch.setattr(collector.store, "write_rows", failing)
    request = b.proto_request(4)
    refused = _post(collector, request)
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert "store unavailable: disk I/O error" in refused.json()["message"]
    assert _post(collector, request).status_code == 200
    with SpanStore(collector.store.path) as store:
        assert store.count() == 4


def test_a_request_whose_client_has_gone_is_not_written(tmp_path, monkeypatch):
    first, gone = b.proto_request(3), b.proto_request(3)
    with BackgroundCollector(tmp_path / "s.db", max_body_bytes=100_000) as collector:
        held = _HeldStore(collector, monkeypatch)
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(_post, collector, first)
            assert held.entered.wait(10)
            with pytest.raises(httpx.ReadTimeout):
                _post(collector, gone, timeout=0.5)
            assert (
                eventually(lambda: _health(collector)["requests_abandoned"], lambda n: n == 1) == 1
            )
            held.release.set()
            assert pending.result().status_code == 200
        first_trace = first.resource_spans[0].scope_spans[0].spans[0].trace_id.hex()
        assert _traces(collector) == {first_trace}


def test_max_memory_keyword_wins_over_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("HOPTRACE_MAX_MEMORY", "300MiB")
    with BackgroundCollector(tmp_path / "a.db") as from_env:
        assert _health(from_env)["max_memory_bytes"] == 300 * MiB
    with BackgroundCollector(tmp_path / "b.db", max_memory="200MiB") as from_keyword:
        assert _health(from_keyword)["max_memory_bytes"] == 200 * MiB
    monkeypatch.delenv("HOPTRACE_MAX_MEMORY")
    with BackgroundCollector(tmp_path / "c.db") as default:
        assert _health(default)["max_memory_bytes"] == DEFAULT_MAX_MEMORY_BYTES


def test_max_memory_too_small_for_one_body_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="raise --max-memory or lower --max-body-bytes"):
        BackgroundCollector(tmp_path / "s.db", max_memory="16MiB")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("512MiB", 512 * MiB), ("1GiB", 1024 * MiB), ("300MB", 300_000_000), ("64m", 64 * MiB),
     ("1.5MiB", int(1.5 * MiB)), ("1000", 1000)],
)  # fmt: skip
def test_sizes_are_read_with_their_units(text, expected):
    assert parse_size(text) == expected


def test_collect_refuses_a_bad_max_memory_in_one_line(tmp_path):
    done = hoptrace("collect", "--store", str(tmp_path / "s.db"), "--max-memory", "lots")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "hoptrace: error: --max-memory must be a size such as 512MiB, 1GiB or 300MB, got 'lots'"
    ]


def test_memory_budget_refuses_past_its_limit_and_takes_each_release_once():
    budget = MemoryBudget(100)
    first = budget.reserve(60)
    assert first is not None and budget.reserve(50) is None
    assert first.grow_to(90) and not first.grow_to(101)
    first.release()
    first.release()
    assert budget.in_flight_bytes == 0 and budget.peak_bytes == 90 and budget.refused == 2
    assert not first.grow_to(10)  # a released reservation holds nothing again
    assert budget.in_flight_bytes == 0
