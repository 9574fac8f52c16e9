"""``bench`` against servers that fail or never stop talking: a counted error for each
request, memory bounded, and a non-zero exit when nothing succeeded."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import free_port
from tests.helpers import hoptrace
from tests.hostile.endless import endless, hoptrace_peak
from tests.hostile.servers import serving


def _env() -> dict[str, str]:
    # No OTLP receiver: the bench runs untraced whatever listens on 4318 here.
    return {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}"}


async def _always_500(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 500, "headers": []})
    await send({"type": "http.response.body", "body": b"no"})


@pytest.fixture
def failing() -> Iterator[str]:
    with serving(_always_500) as url:
        yield url + "/v1"


@pytest.mark.parametrize("stream", ["--stream", "--no-stream"])
def test_bench_exits_non_zero_when_no_request_succeeded(failing: str, stream: str):
    result = hoptrace(
        "bench", failing, "--concurrency", "1", "--requests", "2", "--warmup", "0",
        "--timeout", "5", stream, env=_env(), timeout=60,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "no measured request succeeded (500)" in result.stderr
    assert "Traceback" not in result.stderr


#: Generous: a bench run holds about 60 MiB of code and libraries before its first
#: request; the answers here are 400 MiB after decompression.
PEAK_MIB = 150


@pytest.mark.parametrize(
    ("kind", "stream"),
    [("sse_line", "--stream"), ("error_body", "--stream"), ("error_body", "--no-stream"),
     ("json", "--no-stream"), ("gzip", "--no-stream"), ("gzip_sse", "--stream")],
)  # fmt: skip
def test_bench_against_an_endless_answer_counts_an_error_in_bounded_memory(kind, stream):
    with serving(endless(kind)) as url:
        result, peak_mib = hoptrace_peak(
            "bench", url + "/v1", "--concurrency", "1", "--requests", "1", "--warmup", "0",
            "--timeout", "20", "--max-answer-bytes", "4MiB", stream, "--format", "json",
            env=_env(), timeout=120,
        )  # fmt: skip
    assert result.returncode == 1, result.stderr  # nothing succeeded
    errors = json.loads(result.stdout)["levels"][0]["errors"]
    expected = "500" if kind == "error_body" else "too_large"
    assert errors == {expected: 1}, result.stdout
    assert peak_mib < PEAK_MIB, f"peak {peak_mib:.0f} MiB"


async def _chat(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A quick OpenAI-style stream: one content chunk, then [DONE]."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    body = b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\ndata: [DONE]\n\n'
    headers = [(b"content-type", b"text/event-stream")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _collector_that_stops_answering() -> Any:
    """Answers the bench's first probe like a collector, then never answers again."""
    answered = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        if answered:
            while (await receive())["type"] != "http.disconnect":
                pass
            return
        answered.append(True)
        await send({"type": "http.response.start", "status": 400, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    return app


def test_bench_ends_on_time_when_its_collector_stops_answering_mid_run(tmp_path):
    with serving(_chat) as chat, serving(_collector_that_stops_answering()) as otlp:
        env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": otlp}
        env["HOPTRACE_STORE"] = str(tmp_path / "none.db")  # no store to wait for traces in
        started = time.monotonic()
        result = hoptrace(
            "bench", chat + "/v1", "--concurrency", "1", "--requests", "20", "--warmup", "0",
            "--format", "json", env=env, timeout=120,
        )  # fmt: skip
        took = time.monotonic() - started
        # The same bench with tracing off, on the same machine at the same moment: what
        # the bench itself takes, however busy the cores are.
        started = time.monotonic()
        alone = hoptrace(
            "bench", chat + "/v1", "--concurrency", "1", "--requests", "20", "--warmup", "0",
            "--format", "json", env={**env, "OTEL_SDK_DISABLED": "true"}, timeout=120,
        )  # fmt: skip
        untraced = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert alone.returncode == 0, alone.stderr
    assert json.loads(result.stdout)["levels"][0]["errors"] == {}
    # Flush and shutdown give the silent collector 2 s each at most; the exporter's own
    # retries would add tens of seconds.
    assert took < untraced + 8, f"bench took {took:.1f} s, {untraced:.1f} s untraced"
