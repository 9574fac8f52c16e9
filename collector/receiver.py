"""The embedded OTLP/HTTP receiver: ``POST /v1/traces`` (and ``POST /v1/logs``, the
events of spans: :mod:`collector.logs`) into a :class:`SpanStore`.

It accepts OTLP protobuf (``application/x-protobuf``) and OTLP JSON
(``application/json``), plain or gzip-encoded (every member), as the OpenTelemetry
exporters send them. A batch is answered 200 only after it is committed to the store.

What it answers:

- **200** after commit. Spans that can never be stored (bad ids, times outside
  1970..2200, latencies or token counts out of range, integers outside int64, nesting
  deeper than :data:`collector.validate.MAX_VALUE_DEPTH`, strings that are not UTF-8;
  see :mod:`collector.validate`) are rejected one by one with OTLP partial success and the
  reasons; the rest of the batch is stored.
- **4xx** with the reason for a body that is not OTLP at all (400), a wrong content
  type or encoding (415), a body over ``max_body_bytes`` (413), a missing token (401),
  a body slower than ``min_body_rate`` after ``body_timeout_s`` (408); nothing of it
  is stored. No body gets a 500.
- **503 with Retry-After** when the requests in flight already hold ``max_memory``
  (memory is held for the bytes of a body that have arrived, grown as it comes in),
  when the store fails, or while the collector shuts down. The exporter sends the
  batch again after the delay (OTLP/HTTP throttling).

A request whose client has gone (timed out, closed the connection) is not decoded
or written any further. Bodies are decoded one at a time on a worker thread, so the
event loop keeps answering; one writer thread commits the rows of many requests per
transaction (:mod:`collector.writer`).

Prompt and completion content (the attributes :func:`tracer.attributes.is_content_key`
names, which GenAI instrumentations record by default) is dropped before a span is
stored, unless the receiver is made with ``keep_content=True``; /healthz counts the
attributes dropped.

/healthz also gives the store's size, oldest span and what retention removed, and adds
up the spans the senders dropped before sending (``spans_dropped_by_senders``):
hoptrace's batch processor puts the count of the spans it could not send
(:data:`tracer.attributes.SPANS_DROPPED`) on the resource of the next batch it sends.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from collector.content import ContentFilter
from collector.decode import Decoded, RequestError, decode_body
from collector.live import PATHS as LIVE_PATHS
from collector.live import LiveMetrics, live_metrics_on
from collector.live import answer as answer_live
from collector.logs import LOGS_PATH, decode_logs_body, logs_reply
from collector.memory import MemoryBudget, MiB, Reservation, request_cost, resolve_max_memory
from collector.pending import DEFAULT_SETTLE_S
from collector.store import SpanStore
from collector.writer import ShuttingDown, Ticket, Writer
from tracer._errors import ConfigError

__all__ = [
    "DEFAULT_BODY_TIMEOUT_S",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MIN_BODY_RATE",
    "RETRY_AFTER_S",
    "OtlpReceiver",
]

_logger = logging.getLogger(__name__)
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
#: Seconds a refused exporter is asked to wait before sending again.
RETRY_AFTER_S = 1
#: Seconds a body may take before the minimum rate applies, and that rate in bytes/s.
DEFAULT_BODY_TIMEOUT_S = 10.0
DEFAULT_MIN_BODY_RATE = 32 * 1024
#: Seconds a stopping collector keeps committing what it had queued; the rest is refused.
DRAIN_S = 3.0
#: How much a gzip body is reserved for, times its size, before it is inflated.
_GZIP_RATIO = 4
_PROTO_TYPES = ("application/x-protobuf", "application/protobuf")
_JSON_TYPES = ("application/json",)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


#: The counts /healthz gives, in its order.
_COUNTS = """spans_stored spans_rejected requests_rejected requests_refused requests_abandoned
requests_too_slow keep_content content_attributes_dropped spans_dropped_by_senders
log_records_stored log_records_rejected log_records_without_span""".split()


class _Request:
    """What the event loop knows of one export request while it is in flight."""

    __slots__ = ("answered", "gone", "logs", "ticket")

    def __init__(self) -> None:
        self.answered = False
        self.gone = False
        self.logs = False  # a /v1/logs request
        self.ticket: Ticket | None = None


class OtlpReceiver:
    """An ASGI app that receives OTLP/HTTP traces into ``store``.

    Args:
        store: where spans go.
        max_body_bytes: the largest body accepted, before and after gzip (413 past it).
        token: when set, requests must carry ``Authorization: Bearer <token>`` (401);
            an empty token is an error (it would turn authentication off).
        keep_content: store prompt and completion attributes too (by default they are
            dropped before the span is stored; see :func:`tracer.attributes.is_content_key`).
        max_memory: the most the requests in flight may hold, in bytes or as a size
            (``"512MiB"``); past it new requests get 503 with ``Retry-After``. None reads
            ``$HOPTRACE_MAX_MEMORY``, else 256 MiB (see :mod:`collector.memory`).
        body_timeout_s: seconds a body may take before ``min_body_rate`` applies.
        min_body_rate: bytes a second a body must average after ``body_timeout_s``;
            a slower one is answered 408 and its memory given back, so uploads that
            trickle in cannot hold the collector (default 32 KiB/s after 10 s).
        live_metrics: attribute traces as they complete and serve ``GET /metrics``
            and ``GET /live`` (:mod:`collector.live`); None reads
            ``$HOPTRACE_LIVE_METRICS`` (off when unset).
        otlp_metrics_endpoint: with live metrics, also push them by OTLP/HTTP here
            (None reads ``$HOPTRACE_OTLP_METRICS_ENDPOINT``).
        live_settle_s: with live metrics, seconds a trace that looks complete waits
            for more of its spans before it is attributed (:mod:`collector.pending`).

    Raises:
        ValueError: ``max_body_bytes`` is not positive, ``token`` is empty, or
            ``max_memory`` cannot hold one request of ``max_body_bytes``
            (:class:`ConfigError`, a ValueError).
    """

    def __init__(
        self,
        store: SpanStore,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        token: str | None = None,
        keep_content: bool = False,
        max_memory: int | str | None = None,
        body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
        min_body_rate: int = DEFAULT_MIN_BODY_RATE,
        live_metrics: bool | None = None,
        otlp_metrics_endpoint: str | None = None,
        live_settle_s: float = DEFAULT_SETTLE_S,
    ):
        if not body_timeout_s > 0:
            raise ValueError(f"body_timeout_s must be positive, got {body_timeout_s!r}")
        if min_body_rate <= 0:
            raise ValueError(f"min_body_rate must be positive, got {min_body_rate!r}")
        if max_body_bytes <= 0:
            raise ValueError(f"max_body_bytes must be positive, got {max_body_bytes!r}")
        if token is not None and not token.strip():
            raise ConfigError(
                "the collector token is empty, which would turn authentication off; give a "
                "token, or leave it unset to run without one"
            )
        limit = resolve_max_memory(max_memory)
        need = request_cost(max_body_bytes, "json")
        if limit < need:
            raise ConfigError(
                f"max memory of {limit / MiB:.0f} MiB cannot hold one body of "
                f"{max_body_bytes} bytes (that needs {need / MiB:.0f} MiB); raise "
                "--max-memory or lower --max-body-bytes"
            )
        self.store = store
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s
        self.min_body_rate = min_body_rate
        self._token = token.encode() if token else None
        self.keep_content = keep_content
        self._content = None if keep_content else ContentFilter()
        self.budget = MemoryBudget(limit)
        self._decoder = ThreadPoolExecutor(1, thread_name_prefix="hoptrace-decode")
        self.live: LiveMetrics | None = None
        if live_metrics_on(live_metrics):
            self.live = LiveMetrics(
                otlp_metrics_endpoint=otlp_metrics_endpoint, settle_s=live_settle_s
            )
        self._writer = Writer(store, None if self.live is None else self.live.offer)
        self._closing = False
        self.spans_stored = 0
        self.spans_rejected = 0
        self.requests_rejected = 0
        self.requests_refused = 0
        self.requests_abandoned = 0
        self.requests_too_slow = 0
        self.content_attributes_dropped = 0
        self.spans_dropped_by_senders = 0
        self.log_records_stored = 0
        self.log_records_rejected = 0
        self.log_records_without_span = 0
        self._unexpected_logged = False

    def begin_shutdown(self) -> None:
        """Stop taking batches: new requests get 503; what is queued is committed for up
        to :data:`DRAIN_S` seconds and the rest refused, so every request is answered."""
        if not self._closing:
            self._closing = True
            self._writer.refuse_after(time.monotonic() + DRAIN_S)

    def close(self) -> None:
        """Stop the decoder and the writer (after :meth:`begin_shutdown`, if not yet)."""
        self.begin_shutdown()
        self._decoder.shutdown(wait=True, cancel_futures=True)
        self._writer.close()
        if self.live is not None:
            self.live.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        request = _Request()
        try:
            if path in ("/", "/healthz", "/status"):
                if method != "GET":
                    raise RequestError(405, f"{path} takes GET")
                await _respond(send, 200, "application/json", orjson.dumps(self.health()))
                return
            if path in LIVE_PATHS:
                self._check_token({k.lower(): v for k, v in scope["headers"]})
                query = scope.get("query_string", b"")
                reply = await answer_live(self.live, path, method, query, self.health())
                await _respond(send, *reply)
                return
            if path not in ("/v1/traces", LOGS_PATH):
                raise RequestError(
                    404, f"no such endpoint {path!r}; send traces to /v1/traces, logs to /v1/logs"
                )
            if method != "POST":
                raise RequestError(405, f"{path} takes POST")
            request.logs = path == LOGS_PATH
            await self._export(scope, receive, send, request)
        except RequestError as bad:
            if request.gone:
                return
            if bad.status == 503:
                self.requests_refused += 1
            else:
                self.requests_rejected += 1
            request.answered = True
            body = orjson.dumps({"code": 14 if bad.status == 503 else 3, "message": bad.reason})
            await _respond(send, bad.status, "application/json", body, bad.retry_after_s)
        except asyncio.CancelledError:
            # The server gave up waiting (its shutdown timeout): answer, never a traceback.
            if request.ticket is not None:
                request.ticket.abandon()
            body = orjson.dumps({"code": 14, "message": "the collector is shutting down"})
            try:
                await _respond(send, 503, "application/json", body, RETRY_AFTER_S)
            except Exception:
                pass

    def health(self) -> dict[str, Any]:
        """What /healthz answers: counts, memory in flight, the store's size and retention.

        Anyone who reaches the port may ask (no token), so it names no path or setting
        beyond these counts and limits."""
        return {
            "status": "stopping" if self._closing else "ok",
            "auth": self._token is not None,
            **{name: getattr(self, name) for name in _COUNTS},
            "max_memory_bytes": self.budget.limit_bytes,
            "in_flight_bytes": self.budget.in_flight_bytes,
            "peak_in_flight_bytes": self.budget.peak_bytes,
            **self.store.health(),
        }

    async def _export(self, scope: Scope, receive: Receive, send: Send, request: _Request) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        self._check_token({k.encode("latin-1"): v.encode("latin-1") for k, v in headers.items()})
        ctype = headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype in _PROTO_TYPES:
            is_json = False
        elif ctype in _JSON_TYPES:
            is_json = True
        else:
            raise RequestError(
                415,
                f"content type {ctype or '(none)'!r} is not OTLP; use application/x-protobuf "
                "or application/json",
            )
        encoding = headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("identity", "gzip", ""):
            raise RequestError(415, f"content encoding {encoding!r} is not supported; use gzip")
        length = headers.get("content-length", "")
        declared = int(length) if length.isdigit() else None
        if declared is not None and declared > self.max_body_bytes:
            raise RequestError(
                413, f"body of {declared} bytes is over the limit of {self.max_body_bytes} bytes"
            )
        if self._closing:
            raise RequestError(503, "the collector is shutting down", RETRY_AFTER_S)
        kind = "json" if is_json else "protobuf"
        # Memory is held for the bytes that have arrived (what decoding them will take),
        # grown as the body comes in: a body that trickles in holds next to nothing.
        ratio = _GZIP_RATIO if encoding == "gzip" else 1
        if declared is not None and not self.budget.fits(
            request_cost(min(self.max_body_bytes, declared * ratio), kind)
        ):
            raise self._full()  # what it says it will need is not free now: not read at all
        reservation = self.budget.reserve(request_cost(0, kind))
        if reservation is None:
            raise self._full()
        try:
            box = [await self._read_body(receive, request, reservation, kind, ratio)]
            watcher = asyncio.ensure_future(self._watch(receive, request))
            try:
                decoded = await asyncio.get_running_loop().run_in_executor(
                    self._decoder,
                    self._decode,
                    box,
                    is_json,
                    encoding == "gzip",
                    kind,
                    reservation,
                    request,
                )
                if decoded is not None and not request.gone:
                    await self._store(send, decoded, is_json, request, watcher)
            finally:
                watcher.cancel()
        finally:
            reservation.release()

    def _decode(
        self,
        box: list[bytes],
        is_json: bool,
        gzipped: bool,
        kind: str,
        reservation: Reservation,
        request: _Request,
    ) -> Decoded | None:
        """On the decoder thread: None when the client has gone meanwhile."""
        if request.gone:
            return None
        if self._closing:
            raise RequestError(503, "the collector is shutting down", RETRY_AFTER_S)
        try:
            if request.logs:
                decoded, without_span = decode_logs_body(
                    box,
                    is_json=is_json,
                    gzipped=gzipped,
                    max_body_bytes=self.max_body_bytes,
                    keep_content=self.keep_content,
                    grow=lambda size: reservation.grow_to(request_cost(size, kind)),
                )
                self.log_records_without_span += without_span
                return decoded
            return decode_body(
                box,
                is_json=is_json,
                gzipped=gzipped,
                max_body_bytes=self.max_body_bytes,
                content=self._content,
                grow=lambda size: reservation.grow_to(request_cost(size, kind)),
            )
        except RequestError:
            raise
        except Exception as exc:  # a bug here must not cost the exporter a 500 and a retry loop
            if not self._unexpected_logged:
                self._unexpected_logged = True
                _logger.exception("could not decode a request body")
            raise RequestError(400, f"body could not be decoded ({type(exc).__name__})") from exc

    async def _store(
        self,
        send: Send,
        decoded: Decoded,
        is_json: bool,
        request: _Request,
        watcher: asyncio.Future[None],
    ) -> None:
        if decoded.rows:
            ticket = request.ticket = Ticket(decoded.rows, asyncio.get_running_loop())
            decoded.rows = []
            self._writer.submit(ticket)
            await asyncio.wait((ticket.future, watcher), return_when=asyncio.FIRST_COMPLETED)
            if not ticket.future.done():  # the client has gone: its rows are not written
                ticket.abandon()
                return
            result = ticket.future.result()
            if isinstance(result, ShuttingDown):
                raise RequestError(503, "the collector is shutting down", RETRY_AFTER_S)
            if isinstance(result, BaseException):
                raise RequestError(503, f"store unavailable: {result}", RETRY_AFTER_S)
            if request.logs:
                self.log_records_stored += result
            else:
                self.spans_stored += result
        self.content_attributes_dropped += decoded.content_dropped
        self.spans_dropped_by_senders += decoded.sender_dropped
        rejected = decoded.rejections.count
        request.answered = True
        if request.logs:
            self.log_records_rejected += rejected
            ctype, body = logs_reply(is_json, decoded.rejections)
            await _respond(send, 200, ctype, body)
            return
        self.spans_rejected += rejected
        message = decoded.rejections.message() if rejected else ""
        if is_json:
            reply: dict[str, Any] = {}
            if rejected:
                reply["partialSuccess"] = {"rejectedSpans": str(rejected), "errorMessage": message}
            await _respond(send, 200, "application/json", orjson.dumps(reply))
        else:
            response = ExportTraceServiceResponse()
            if rejected:
                response.partial_success.rejected_spans = rejected
                response.partial_success.error_message = message
            await _respond(send, 200, "application/x-protobuf", response.SerializeToString())

    async def _watch(self, receive: Receive, request: _Request) -> None:
        """Wait for the client to go away; then mark the request so nothing more is done."""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                if not request.answered:
                    request.gone = True
                    self.requests_abandoned += 1
                    if request.ticket is not None:
                        request.ticket.abandon()
                return

    def _check_token(self, headers: dict[bytes, bytes]) -> None:
        """401 unless the request carries the token (when one is set)."""
        if self._token is not None:
            given = headers.get(b"authorization", b"")
            if not hmac.compare_digest(given, b"Bearer " + self._token):
                raise RequestError(401, "missing or wrong bearer token in Authorization header")

    def _full(self) -> RequestError:
        return RequestError(
            503,
            f"the collector is at its memory limit ({self.budget.limit_bytes // MiB} MiB "
            "held by requests in flight); send again after Retry-After",
            RETRY_AFTER_S,
        )

    async def _read_body(
        self, receive: Receive, request: _Request, reservation: Reservation, kind: str, ratio: int
    ) -> bytes:
        """The body, as it arrives: at least ``min_body_rate`` bytes a second once
        ``body_timeout_s`` has passed (408 else), memory grown for each chunk (503 when
        it does not fit), at most ``max_body_bytes`` (413)."""
        chunks: list[bytes] = []
        size = 0
        loop = asyncio.get_running_loop()
        started = loop.time()
        while True:
            # The body must keep up with the minimum rate after the grace time.
            wait_s = started + self.body_timeout_s + size / self.min_body_rate - loop.time()
            try:
                message = await asyncio.wait_for(receive(), max(wait_s, 0.0))
            except TimeoutError:
                self.requests_too_slow += 1
                raise RequestError(
                    408,
                    f"the body came slower than {self.min_body_rate} bytes/s after "
                    f"{self.body_timeout_s:g} s ({size} bytes so far); send it again",
                ) from None
            if message["type"] == "http.disconnect":
                request.gone = True
                self.requests_abandoned += 1
                raise RequestError(400, "client disconnected before the body was complete")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise RequestError(413, f"body is over the limit of {self.max_body_bytes} bytes")
            if chunk and not reservation.grow_to(
                request_cost(min(self.max_body_bytes, size * ratio), kind)
            ):
                raise self._full()
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


async def _respond(
    send: Send, status: int, ctype: str, body: bytes, retry_after_s: int | None = None
) -> None:
    headers = [(b"content-type", ctype.encode()), (b"content-length", str(len(body)).encode())]
    if retry_after_s is not None:
        headers.append((b"retry-after", str(retry_after_s).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
