"""Benchmark an OpenAI-compatible chat endpoint the careful way, every request traced.

The method: a fixed prompt, a fixed ``max_tokens`` and temperature 0; a warm-up at
every concurrency level (at least as many requests as the level's concurrency) that
is not measured; then N measured requests per level. With ``rates``, each level is an
open loop instead (:mod:`tracer.bench.openloop`): requests sent at that rate whether or
not earlier ones were answered, latency also measured from each intended send time.
Per level: status counts, end-to-end P50/P90/P99, time to first chunk, inter-chunk
latency, output tokens/s and requests/s; with an SLO, goodput and SLO attainment.
The knee is the first level where added clients bought little throughput while
latency grew (an open loop's: the first rate throughput stopped following;
:mod:`tracer.analysis.checks.sweep`); with the traces at hand, the stage whose time
grew most between the lowest level and the knee is named.

    result = run_bench("http://127.0.0.1:8000/v1", api_key="...", levels=[1, 4, 8])
    print(result.knee)
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

import tracer
from tracer import attributes as attrs
from tracer._answers import DEFAULT_BENCH_ANSWER_BYTES, AnswerTooLarge, limit_answers
from tracer._sse import aiter_sse_data
from tracer.analysis.aggregate import Stats, stats
from tracer.analysis.checks.slo import Slo
from tracer.analysis.checks.sweep import (
    DEFAULT_ATTAINMENT,
    Knee,
    RateKnee,
    SweepSlo,
    check_slo,
    find_knee,
    find_rate_knee,
    judge_slo,
)
from tracer.bench.args import check_arguments, refuse_hopeless, warmup_requests
from tracer.bench.chat_protocol import (
    ProtocolError,
    body_content,
    check_content_type,
    chunk_content,
)
from tracer.bench.openloop import Arrivals, Sent, send_open_loop
from tracer.instrument.host import record_client_load

__all__ = [
    "DEFAULT_PROMPT",
    "RUN_ATTRIBUTE",
    "BenchResult",
    "LevelResult",
    "Sample",
    "run_bench",
]

DEFAULT_PROMPT = (
    "Explain in three sentences why a faster model does not make a chat service "
    "equally faster for its users."
)
RUN_ATTRIBUTE = attrs.RUN


@dataclass(frozen=True, slots=True)
class Sample:
    """One measured request as the client saw it."""

    trace_id: str
    status: str  # "200", another HTTP status, or timeout / connect / stream_error / protocol
    e2e_ms: float
    ttfc_ms: float | None
    gaps_ms: tuple[float, ...]
    output_tokens: int
    detail: str | None = None  # what went wrong, for a failed request
    #: an open loop's request: ms from its intended send time to the actual send (its
    #: wait for a slot included), and its wait for a slot of ``max_concurrency``
    lag_ms: float = 0.0
    queue_ms: float = 0.0
    intended_s: float = 0.0  # its intended send time, s after the level's first

    @property
    def ok(self) -> bool:
        """A 200 answer that finished without an error event."""
        return self.status == "200"

    @property
    def intended_e2e_ms(self) -> float:
        """End to end from the intended send time (no coordinated omission)."""
        return self.e2e_ms + self.lag_ms


@dataclass
class LevelResult:
    """The measured requests of one concurrency level."""

    concurrency: int
    run: str
    samples: list[Sample] = field(default_factory=list)
    wall_s: float = 0.0
    #: an open-loop level: the rate sent (requests/s) and the arrival process; its
    #: ``concurrency`` is then the client's cap (0: none)
    rate_per_s: float | None = None
    arrivals: str | None = None

    @property
    def ok(self) -> list[Sample]:
        """The successful samples."""
        return [s for s in self.samples if s.ok]

    def errors(self) -> dict[str, int]:
        """Failed requests by status code or error kind."""
        out: dict[str, int] = {}
        for s in self.samples:
            if not s.ok:
                out[s.status] = out.get(s.status, 0) + 1
        return dict(sorted(out.items()))

    def error_examples(self) -> dict[str, str]:
        """One example of what went wrong, per failure status."""
        out: dict[str, str] = {}
        for s in self.samples:
            if not s.ok and s.detail and s.status not in out:
                out[s.status] = s.detail
        return dict(sorted(out.items()))

    def e2e(self) -> Stats:
        """End-to-end ms of the successful requests."""
        return stats(s.e2e_ms for s in self.ok)

    def ttfc(self) -> Stats | None:
        """Time to the first content chunk (streams only)."""
        values = [s.ttfc_ms for s in self.ok if s.ttfc_ms is not None]
        return stats(values) if values else None

    def itl(self) -> Stats | None:
        """Inter-chunk gaps after the first chunk, over every successful stream."""
        values = [g for s in self.ok for g in s.gaps_ms]
        return stats(values) if values else None

    def output_tokens_per_s(self) -> float:
        """Output tokens of the successful requests per second of the level's wall time."""
        return sum(s.output_tokens for s in self.ok) / self.wall_s if self.wall_s > 0 else 0.0

    def requests_per_s(self) -> float:
        """Successful requests per second of wall time."""
        return len(self.ok) / self.wall_s if self.wall_s > 0 else 0.0

    def answer_rate(self) -> float:
        """An open loop's answers per second, first to last: the rate it kept up with."""
        return _rate(sorted(s.intended_s + s.intended_e2e_ms / 1000 for s in self.ok))

    def sent_rate(self) -> float:
        """An open loop's requests per second as the schedule sent them."""
        return _rate(sorted(s.intended_s for s in self.samples))

    def latency_growth(self) -> float:
        """An open loop's P50 (from the intended send) in its second half over its first."""
        ok = sorted(self.ok, key=lambda s: s.intended_s)
        half = len(ok) // 2
        if half < 1:
            return 1.0
        first = statistics.median(s.intended_e2e_ms for s in ok[:half])
        return statistics.median(s.intended_e2e_ms for s in ok[half:]) / first if first else 1.0

    def open_loop(self) -> dict[str, Stats] | None:
        """An open loop's end to end from the intended send, send lag and slot wait."""
        if self.rate_per_s is None or not self.ok:
            return None
        return {
            "e2e_from_intended_ms": stats(s.intended_e2e_ms for s in self.ok),
            "send_lag_ms": stats(s.lag_ms - s.queue_ms for s in self.ok),
            "queue_ms": stats(s.queue_ms for s in self.ok),
        }


def _rate(times: list[float]) -> float:
    """Events per second over sorted ``times``: the gaps between the first and last."""
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    return (len(times) - 1) / span if span > 0 else 0.0


@dataclass
class BenchResult:
    """A whole sweep."""

    url: str
    max_tokens: int
    stream: bool
    run: str
    levels: list[LevelResult]
    knee: Knee | None = None
    notes: list[str] = field(default_factory=list)
    #: With an SLO: goodput and attainment per level (``tracer.analysis.checks.sweep``).
    slo: SweepSlo | None = None
    #: An open-loop sweep's knee: the first rate throughput stopped following.
    rate_knee: RateKnee | None = None


def _body(model: str, prompt: str, max_tokens: int, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


async def _one(
    client: httpx.AsyncClient,
    url: str,
    headers: dict[str, str],
    body: dict[str, Any],
    attributes: dict[str, Any],
    timeout_s: float,
) -> Sample:
    """One request, bounded as a whole by ``timeout_s`` (not per read: a server that
    drips a token or a keep-alive comment cannot stretch it)."""
    with tracer.stage("client", span_name="bench request", **attributes) as span:
        cpu_at_start = time.process_time_ns()
        exchange = _Exchange(span)
        try:
            await asyncio.wait_for(exchange.run(client, url, headers, body), timeout_s)
        except (TimeoutError, httpx.TimeoutException):
            exchange.fail("timeout", f"no complete answer within {timeout_s:g} s")
        except AnswerTooLarge as exc:
            exchange.fail("too_large", f"{exc} (--max-answer-bytes)")
        except httpx.ConnectError as exc:
            exchange.fail("connect", str(exc) or type(exc).__name__)
        except ProtocolError as exc:
            exchange.fail("protocol", str(exc))
        except httpx.HTTPError as exc:
            exchange.fail("protocol", f"{type(exc).__name__}: {exc}")
        span.set_attribute(attrs.BENCH_STATUS, exchange.status)
        # What a load model reads (docs/whatif.md): this process's CPU and the host's.
        record_client_load(span, cpu_at_start)
    return exchange.sample()


class _Exchange:
    """The measurements of one request while it runs."""

    def __init__(self, span: Any) -> None:
        self.span = span
        self.trace_id = format(span.get_span_context().trace_id, "032x")
        self.start_ns = time.time_ns()
        self.started = time.perf_counter()
        self.status = "protocol"
        self.detail: str | None = None
        self.ttfc: float | None = None
        self.last = 0.0
        self.gaps: list[float] = []
        self.chunks = 0
        self.usage_tokens: int | None = None
        self.e2e_ms = 0.0

    def fail(self, status: str, detail: str) -> None:
        self.status, self.detail = status, detail

    def content(self) -> None:
        now = time.perf_counter()
        if self.ttfc is None:
            self.ttfc = (now - self.started) * 1000
            tracer.mark_first_token(self.span, self.start_ns)
        else:
            self.gaps.append((now - self.last) * 1000)
        self.last = now
        self.chunks += 1

    async def run(
        self, client: httpx.AsyncClient, url: str, headers: dict[str, str], body: dict[str, Any]
    ) -> None:
        if not body["stream"]:
            # Streamed, so that an error answer's body is never read, and a 200's only
            # up to the client's byte limit (tracer._answers).
            async with client.stream("POST", url, json=body, headers=headers) as resp:
                self.status = str(resp.status_code)
                if resp.status_code == 200:
                    check_content_type(resp.headers.get("content-type", ""), stream=False)
                    raw = await resp.aread()
            if resp.status_code == 200:
                try:
                    payload = orjson.loads(raw)  # at most 1,024 levels deep: no RecursionError
                except orjson.JSONDecodeError:
                    raise ProtocolError("the body is not JSON") from None
                text, self.usage_tokens = body_content(payload)
                self.chunks = len(text.split())
                self.ttfc = None
            self.e2e_ms = (time.perf_counter() - self.started) * 1000
            return
        done = False
        async with client.stream("POST", url, json=body, headers=headers) as resp:
            self.status = str(resp.status_code)
            if resp.status_code == 200:
                check_content_type(resp.headers.get("content-type", ""), stream=True)
                events = aiter_sse_data(resp.aiter_lines())
                async for data in events:
                    if data.strip() == "[DONE]":
                        done = True
                        break
                    text, tokens, error = chunk_content(data)
                    if error is not None:
                        self.fail("stream_error", error)
                        break
                    if tokens is not None:
                        self.usage_tokens = tokens
                    if text:
                        self.content()
                if done:
                    await _drain(events)
        # End to end includes closing the response, as the request's span does.
        self.e2e_ms = (time.perf_counter() - self.started) * 1000
        if self.status == "200" and not done:
            raise ProtocolError("the stream ended without [DONE]")
        if self.status == "200" and not self.chunks:
            raise ProtocolError("the answer holds no token")

    def sample(self) -> Sample:
        if not self.e2e_ms:
            self.e2e_ms = (time.perf_counter() - self.started) * 1000
        tokens = self.usage_tokens if isinstance(self.usage_tokens, int) else self.chunks
        return Sample(
            self.trace_id,
            self.status,
            self.e2e_ms,
            self.ttfc,
            tuple(self.gaps),
            tokens,
            self.detail,
        )


#: How long the rest of a stream may take to end after its ``[DONE]``.
DRAIN_S = 0.5


async def _drain(events: AsyncIterator[str]) -> None:
    """Read what follows ``[DONE]`` to the body's end, as OpenAI's client does
    (openai-python, ``Stream.__stream__``), so that the connection goes back to the
    pool: a response closed before its body ends closes its connection, and every
    request would open a new one. A server that keeps the stream open past
    :data:`DRAIN_S` gets it closed, as before."""
    with contextlib.suppress(TimeoutError, httpx.HTTPError):  # AnswerTooLarge too
        async with asyncio.timeout(DRAIN_S):
            async for _ in events:
                pass


async def _phase(
    client: httpx.AsyncClient,
    url: str,
    headers: dict[str, str],
    body: dict[str, Any],
    attributes: dict[str, Any],
    count: int,
    concurrency: int,
    tick: Callable[[], None],
    timeout_s: float,
) -> tuple[list[Sample], float]:
    samples: list[Sample] = []
    left = count

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            samples.append(await _one(client, url, headers, body, attributes, timeout_s))
            tick()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(min(concurrency, count))))
    return samples, time.perf_counter() - started


async def run_bench_async(
    base_url: str,
    *,
    api_key: str | None = None,
    levels: Sequence[int] = (1, 2, 4, 8),
    requests: int = 32,
    warmup: int = 4,
    max_tokens: int = 64,
    prompt: str = DEFAULT_PROMPT,
    model: str = "default",
    stream: bool = True,
    timeout_s: float = 60.0,
    run: str | None = None,
    progress: Callable[[str, int], None] | None = None,
    slo: Slo | None = None,
    slo_attainment: float = DEFAULT_ATTAINMENT,
    max_answer_bytes: int = DEFAULT_BENCH_ANSWER_BYTES,
    rates: Sequence[float] | None = None,
    arrivals: Arrivals | None = None,
    max_concurrency: int | None = None,
    seed: int = 1,
) -> BenchResult:
    """Sweep ``levels``; see the module docstring for the method. With ``slo``, each
    level's goodput and SLO attainment, and the highest level whose attainment reaches
    ``slo_attainment`` (:mod:`tracer.analysis.checks.sweep`). An answer larger than
    ``max_answer_bytes`` after decompression is a failed request (``too_large``). With
    ``rates``, an open loop at each rate (``arrivals``, Poisson by default; at most
    ``max_concurrency`` in flight, when given) instead of ``levels``.

    Raises:
        ConfigError: bad arguments, or every warm-up request of the first level failed
            the same way (a wrong key, nothing listening).
    """
    check_arguments(base_url, levels, requests, warmup, max_tokens, timeout_s)
    check_slo(slo, stream, slo_attainment)
    url = base_url.rstrip("/") + "/chat/completions"
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    body = _body(model, prompt, max_tokens, stream)
    run = run or f"bench-{uuid.uuid4().hex[:8]}"
    result = BenchResult(base_url, max_tokens, stream, run, [])
    if rates:
        # No pool limit of the client's own: it would be a queue the bench hides.
        limits = httpx.Limits(max_connections=max_concurrency, max_keepalive_connections=64)
    else:
        limits = httpx.Limits(max_connections=max(levels), max_keepalive_connections=max(levels))
    client = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), limits=limits)
    limit_answers(client, max_answer_bytes)
    async with tracer.instrument_httpx(client) as client:
        for index, rate in enumerate(rates or ()):
            process = arrivals or Arrivals()
            level = LevelResult(
                max_concurrency or 0, f"{run}-r{rate:g}", rate_per_s=rate, arrivals=process.kind
            )
            tags = {attrs.BENCH_RATE: rate, attrs.BENCH_ARRIVALS: process.kind}
            for phase, count in (("warm-up", warmup), ("measure", requests)):
                label = f"{run}-warmup" if phase == "warm-up" else level.run
                send = functools.partial(
                    _sent, client, url, headers, body, timeout_s, {**tags, RUN_ATTRIBUTE: label},
                    _ticker(progress, f"{rate:g}/s {phase}"),
                )  # fmt: skip
                done, level.wall_s = await send_open_loop(
                    process.gaps_s(rate, count, seed + index), send, max_concurrency
                )
                level.samples = [x for x in done if isinstance(x, Sample)]
                if index == 0 and level.samples:
                    refuse_hopeless(base_url, level.samples)
            result.levels.append(level)
        for index, c in enumerate(levels if not rates else ()):
            level = LevelResult(c, f"{run}-c{c}")
            warm = warmup_requests(warmup, c)
            if warm:
                tags = {RUN_ATTRIBUTE: f"{run}-warmup", attrs.BENCH_CONCURRENCY: c}
                warmed, _ = await _phase(
                    client, url, headers, body, tags, warm, c,
                    _ticker(progress, f"c={c} warm-up", step=0), timeout_s,
                )  # fmt: skip
                if index == 0:
                    refuse_hopeless(base_url, warmed)
            tags = {RUN_ATTRIBUTE: level.run, attrs.BENCH_CONCURRENCY: c}
            level.samples, level.wall_s = await _phase(
                client, url, headers, body, tags, requests, c,
                _ticker(progress, f"c={c} measure"), timeout_s,
            )  # fmt: skip
            if index == 0 and not warm:
                refuse_hopeless(base_url, level.samples)
            result.levels.append(level)
    result.knee = None if rates else find_knee(result.levels)
    result.rate_knee = find_rate_knee(result.levels) if rates else None
    if slo is not None:
        result.slo = judge_slo(result.levels, slo, slo_attainment)
    return result


async def _sent(
    client: httpx.AsyncClient,
    url: str,
    headers: dict[str, str],
    body: dict[str, Any],
    timeout_s: float,
    tags: dict[str, Any],
    tick: Callable[[], None],
    sent: Sent,
) -> Sample:
    """One open-loop request, its send lag and queue time on its span and sample."""
    lag = {
        attrs.BENCH_SEND_LAG_NS: int(sent.lag_s * 1e9),
        attrs.BENCH_QUEUE_NS: int(sent.queue_s * 1e9),
    }
    sample = await _one(client, url, headers, body, {**tags, **lag}, timeout_s)
    tick()
    return dataclasses.replace(
        sample, lag_ms=sent.lag_s * 1000, queue_ms=sent.queue_s * 1000, intended_s=sent.at_s
    )


def _ticker(
    progress: Callable[[str, int], None] | None, label: str, step: int = 1
) -> Callable[[], None]:
    """Tell ``progress`` of each request done: ``step`` measured requests (warm-up ones
    are not counted)."""

    def tick() -> None:
        if progress is not None:
            progress(label, step)

    return tick


def run_bench(base_url: str, **kwargs: Any) -> BenchResult:
    """Blocking wrapper of :func:`run_bench_async`."""
    return asyncio.run(run_bench_async(base_url, **kwargs))
