"""Live critical-path metrics of the collector: ``GET /metrics`` and ``GET /live``.

When live metrics are on, the writer hands every batch of rows it committed to
:meth:`LiveMetrics.offer`, which only queues it: a sender thread pickles the batches
into a pipe to the attribution process (:mod:`tracer.analysis.live.worker`), where traces
are attributed as ``hoptrace analyze`` would and recorded into Prometheus metrics
(:mod:`collector.metrics`), the last-minute window of ``hoptrace top``
(:mod:`collector.window`) and, opt-in, OTLP metrics (:mod:`collector.otlp_metrics`).
The attribution runs in a process of its own so that it takes nothing from ingest
(the receiver's threads share one interpreter lock), and so that the receiver never
loads numpy or the analyzer.

The queue is bounded (``max_queued_spans``): past it, committed batches are not
attributed (counted in ``hoptrace_live_feed_dropped_spans_total``); the spans are
stored all the same. Settings (keyword, else the variable):

- ``live_metrics`` / ``HOPTRACE_LIVE_METRICS`` (``1``/``true``/``on``): on or off.
- ``otlp_metrics_endpoint`` / ``HOPTRACE_OTLP_METRICS_ENDPOINT``: also push the
  metrics by OTLP/HTTP to this base URL.
- ``settle_s``, ``timeout_s``, ``max_pending_spans``: see :mod:`collector.pending`.

docs/metrics.md has the metric names, labels, limits and buckets.
"""

from __future__ import annotations

import logging
import os
import pickle
import queue
import subprocess
import sys
import threading
from multiprocessing import Pipe
from typing import Any

import orjson

from collector.pending import DEFAULT_SETTLE_S, DEFAULT_TIMEOUT_S
from tracer._errors import ConfigError, ReceiverError

__all__ = [
    "LIVE_ENV",
    "LiveMetrics",
    "LiveUnavailable",
    "OTLP_ENV",
    "PATHS",
    "PROMETHEUS_TEXT",
    "answer",
    "live_metrics_on",
]

_logger = logging.getLogger(__name__)
LIVE_ENV = "HOPTRACE_LIVE_METRICS"
OTLP_ENV = "HOPTRACE_OTLP_METRICS_ENDPOINT"
#: Committed spans waiting for the attribution process, at most.
DEFAULT_MAX_QUEUED_SPANS = 200_000
#: Seconds the attribution process may take to start.
START_S = 60.0
#: Seconds a /metrics or /live request waits for the attribution process.
ANSWER_S = 10.0


class LiveUnavailable(Exception):
    """The attribution process does not answer (it failed or is overloaded)."""


def live_metrics_on(value: bool | None) -> bool:
    """``value``, else ``$HOPTRACE_LIVE_METRICS`` as a boolean (off when unset).

    Raises:
        ConfigError: the variable is set to something that is not a boolean.
    """
    if value is not None:
        return value
    raw = os.environ.get(LIVE_ENV, "").strip().lower()
    if raw in ("", "0", "false", "off", "no"):
        return False
    if raw in ("1", "true", "on", "yes"):
        return True
    raise ConfigError(f"{LIVE_ENV} must be true or false, got {raw!r}")


class LiveMetrics:
    """The receiver's side of the live metrics: a bounded feed to the attribution
    process and the requests that read its metrics. Started at once.

    Raises:
        ValueError: a setting out of range.
        ReceiverError: the attribution process did not start.
    """

    def __init__(
        self,
        *,
        otlp_metrics_endpoint: str | None = None,
        otlp_interval_s: float = 10.0,
        settle_s: float = DEFAULT_SETTLE_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_pending_spans: int = 200_000,
        max_queued_spans: int = DEFAULT_MAX_QUEUED_SPANS,
    ):
        if settle_s < 0 or not timeout_s > settle_s:
            raise ValueError("settle_s must be >= 0 and timeout_s greater than settle_s")
        if max_pending_spans <= 0 or max_queued_spans <= 0:
            raise ValueError("max_pending_spans and max_queued_spans must be positive")
        if not otlp_interval_s > 0:
            raise ValueError(f"otlp_interval_s must be positive, got {otlp_interval_s!r}")
        endpoint = otlp_metrics_endpoint or os.environ.get(OTLP_ENV) or None
        if endpoint and not endpoint.startswith(("http://", "https://")):
            raise ConfigError(
                f"the OTLP metrics endpoint must be an http:// or https:// URL, got {endpoint!r}"
            )
        self.otlp_endpoint = endpoint
        settings = {
            "otlp_endpoint": endpoint,
            "otlp_interval_s": otlp_interval_s,
            "settle_s": settle_s,
            "timeout_s": timeout_s,
            "max_pending_spans": max_pending_spans,
        }
        self.max_queued_spans = max_queued_spans
        self.queued_spans = 0
        self.dropped_spans = 0
        data_read, self._data = Pipe(duplex=False)
        self._control, control_child = Pipe(duplex=True)
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tracer.analysis.live.worker",
                str(data_read.fileno()),
                str(control_child.fileno()),
                orjson.dumps(settings).decode(),
            ],
            pass_fds=(data_read.fileno(), control_child.fileno()),
        )
        data_read.close()
        control_child.close()
        try:  # the process has imported what it needs (a second or so) before ingest begins
            ready = self._control.poll(START_S) and pickle.loads(self._control.recv_bytes())
        except (OSError, EOFError):
            ready = False
        if ready != (0, "ready"):
            self._process.kill()
            self._process.wait()
            raise ReceiverError(
                f"the live metrics could not start within {START_S:g} s; run the collector "
                "with --no-live-metrics, or see the error above"
            )
        self._queue: queue.SimpleQueue[list[tuple] | None] = queue.SimpleQueue()
        self._count_lock = threading.Lock()
        self._ask_lock = threading.Lock()
        self._seq = 0
        self._broken = False
        self._sender = threading.Thread(target=self._send, name="hoptrace-live", daemon=True)
        self._sender.start()

    def offer(self, rows: list[tuple]) -> None:
        """Queue committed rows for attribution (from the writer thread; never blocks)."""
        n = len(rows)
        with self._count_lock:
            if self._broken or self.queued_spans + n > self.max_queued_spans:
                self.dropped_spans += n
                return
            self.queued_spans += n
        self._queue.put(rows)

    def metrics(self, counts: dict[str, Any]) -> bytes:
        """The Prometheus text of the live metrics, with the receiver's ``counts``.

        Raises:
            LiveUnavailable: the attribution process did not answer.
        """
        answer = self._ask("metrics", {**counts, "feed_dropped_spans": self.dropped_spans})
        if not isinstance(answer, bytes):
            raise LiveUnavailable(str(answer))
        return answer

    def window(self, by: str, window_s: float) -> dict[str, Any]:
        """The last ``window_s`` seconds per value of ``by`` (:meth:`Window.summary`).

        Raises:
            ValueError: a bad ``by`` or ``window_s``.
            LiveUnavailable: the attribution process did not answer.
        """
        answer = self._ask("live", (by, window_s))
        if isinstance(answer, str):
            raise ValueError(answer)
        return dict(answer)

    def close(self, timeout_s: float = 2.0) -> None:
        """Hand over what is queued, then stop the attribution process (its metrics live
        in memory only, so a stop does not wait long for it: it runs at a low priority,
        and on a busy machine it would hold the collector's exit up)."""
        self._queue.put(None)
        self._sender.join(timeout=timeout_s)
        self._data.close()
        try:
            self._process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._control.close()

    def _ask(self, kind: str, arg: Any) -> Any:
        with self._ask_lock:
            if self._process.poll() is not None:
                raise LiveUnavailable("the live attribution process has stopped")
            self._seq += 1
            seq = self._seq
            try:
                self._control.send_bytes(pickle.dumps((seq, kind, arg)))
                while self._control.poll(ANSWER_S):
                    got, answer = pickle.loads(self._control.recv_bytes())
                    if got == seq:  # an earlier request's late answer is passed over
                        return answer
            except (OSError, EOFError) as exc:
                raise LiveUnavailable(f"the live attribution process failed: {exc}") from exc
            raise LiveUnavailable(f"the live attribution did not answer within {ANSWER_S:g} s")

    def _send(self) -> None:
        while True:
            rows = self._queue.get()
            if rows is None:
                return
            try:
                if not self._broken:
                    self._data.send_bytes(pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL))
            except OSError as exc:
                _logger.error("live metrics stopped: the attribution process failed (%s)", exc)
                with self._count_lock:
                    self._broken = True
                    self.dropped_spans += len(rows)
            finally:
                with self._count_lock:
                    self.queued_spans -= len(rows)


#: The paths :func:`answer` serves.
PATHS = ("/metrics", "/live")
#: The content type of the Prometheus text format, version 0.0.4.
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


async def answer(
    live: LiveMetrics | None, path: str, method: str, query: bytes, counts: dict[str, Any]
) -> tuple[int, str, bytes]:
    """The answer to ``GET /metrics`` or ``GET /live?by=route&window=60``: (status,
    content type, body); a 4xx or 503 body says why in one JSON ``message``."""
    import asyncio
    from urllib.parse import parse_qs

    def error(status: int, message: str) -> tuple[int, str, bytes]:
        return status, "application/json", orjson.dumps({"message": message})

    if method != "GET":
        return error(405, f"{path} takes GET")
    if live is None:
        return error(
            404,
            "live metrics are off in this collector; start it with --live-metrics "
            f"(or {LIVE_ENV}=true)",
        )
    loop = asyncio.get_running_loop()
    try:
        if path == "/metrics":
            body = await loop.run_in_executor(None, live.metrics, counts)
            return 200, PROMETHEUS_TEXT, body
        params = {k: v[-1] for k, v in parse_qs(query.decode("latin-1")).items()}
        by = params.get("by", "route")
        try:
            window_s = float(params.get("window", "60"))
        except ValueError:
            return error(400, f"window must be a number of seconds, got {params['window']!r}")
        try:
            summary = await loop.run_in_executor(None, live.window, by, window_s)
        except ValueError as bad:
            return error(400, str(bad))
        return 200, "application/json", orjson.dumps(summary)
    except LiveUnavailable as exc:
        return error(503, str(exc))
