"""The embedded OTLP/HTTP receiver: ``POST /v1/traces`` into a :class:`SpanStore`.

It accepts OTLP protobuf (``application/x-protobuf``) and OTLP JSON
(``application/json``), plain or gzip-encoded, as the OpenTelemetry exporters send
them. A batch is answered 200 only after it is committed to the store. Spans that
cannot be stored (no ids, reversed times) are reported with OTLP partial success;
a malformed body, a wrong content type or encoding, or a body over the limit gets a
4xx with the reason, nothing of it is stored, and the receiver keeps serving.

Prompt and completion content (the attributes :func:`tracer.attributes.is_content_key`
names, which GenAI instrumentations record by default) is dropped before a span is
stored, unless the receiver is made with ``keep_content=True``; /healthz counts the
attributes dropped.

Batches from concurrent requests are written by one writer thread in group commits,
so many exporters can send at once.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import queue
import threading
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from collector.store import SpanStore
from tracer.attributes import is_content_key
from tracer.spans.model import Span, Warnings
from tracer.spans.otlp import spans_from_otlp_json, spans_from_otlp_proto

__all__ = ["DEFAULT_MAX_BODY_BYTES", "OtlpReceiver"]

_logger = logging.getLogger(__name__)
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
_PROTO_TYPES = ("application/x-protobuf", "application/protobuf")
_JSON_TYPES = ("application/json",)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class _BadRequest(Exception):
    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


class _ContentFilter:
    """Drops prompt and completion attributes from spans, in place.

    Keys found not to be content are remembered (up to ``max_known`` of them), so a
    span whose keys were all seen before costs one set comparison in C, however many
    attributes it has. Used from the event loop's thread only.
    """

    def __init__(self, max_known: int = 10_000):
        self._clean: set[str] = set()
        self._max_known = max_known

    def drop(self, spans: list[Span]) -> int:
        """Remove the content attributes of ``spans``; returns how many were removed."""
        clean = self._clean
        dropped = 0
        for s in spans:
            attributes = s.attributes
            if not attributes or attributes.keys() <= clean:
                continue
            content = []
            for key in attributes:
                if key in clean:
                    continue
                if is_content_key(key):
                    content.append(key)
                elif len(clean) < self._max_known:
                    clean.add(key)
            for key in content:
                del attributes[key]
            dropped += len(content)
        return dropped


class _Writer:
    """One thread that commits queued batches, several per transaction."""

    def __init__(self, store: SpanStore):
        self._store = store
        self._queue: queue.Queue[tuple[list[Span], Callable[[int | BaseException], None]] | None]
        self._queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="hoptrace-writer", daemon=True)
        self._thread.start()

    def submit(self, spans: list[Span], done: Callable[[int | BaseException], None]) -> None:
        self._queue.put((spans, done))

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch = [item]
            stop = False
            while len(batch) < 64:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                batch.append(nxt)
            spans = [s for group, _ in batch for s in group]
            result: int | BaseException
            try:
                self._store.write(spans)
                result = 0
            except BaseException as exc:  # reported to each waiting request as a 503
                _logger.error("could not store %d spans: %s", len(spans), exc)
                result = exc
            for group, done in batch:
                done(len(group) if isinstance(result, int) else result)
            if stop:
                return

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)


class OtlpReceiver:
    """An ASGI app that receives OTLP/HTTP traces into ``store``.

    Args:
        store: where spans go.
        max_body_bytes: the largest body accepted, before and after gzip (413 past it).
        token: when set, requests must carry ``Authorization: Bearer <token>`` (401).
        keep_content: store prompt and completion attributes too (by default they are
            dropped before the span is stored; see :func:`tracer.attributes.is_content_key`).

    Raises:
        ValueError: ``max_body_bytes`` is not positive.
    """

    def __init__(
        self,
        store: SpanStore,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        token: str | None = None,
        keep_content: bool = False,
    ):
        if max_body_bytes <= 0:
            raise ValueError(f"max_body_bytes must be positive, got {max_body_bytes!r}")
        self.store = store
        self.max_body_bytes = max_body_bytes
        self._token = token.encode() if token else None
        self.keep_content = keep_content
        self._content = None if keep_content else _ContentFilter()
        self._writer = _Writer(store)
        self.spans_stored = 0
        self.spans_rejected = 0
        self.requests_rejected = 0
        self.content_attributes_dropped = 0

    def close(self) -> None:
        """Stop the writer after the queued batches are committed."""
        self._writer.close()

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
        try:
            if path in ("/", "/healthz", "/status"):
                if method != "GET":
                    raise _BadRequest(405, f"{path} takes GET")
                body = orjson.dumps(
                    {
                        "status": "ok",
                        "store": str(self.store.path),
                        "spans_stored": self.spans_stored,
                        "spans_rejected": self.spans_rejected,
                        "requests_rejected": self.requests_rejected,
                        "keep_content": self.keep_content,
                        "content_attributes_dropped": self.content_attributes_dropped,
                    }
                )
                await _respond(send, 200, "application/json", body)
                return
            if path != "/v1/traces":
                raise _BadRequest(404, f"no such endpoint {path!r}; send traces to /v1/traces")
            if method != "POST":
                raise _BadRequest(405, "/v1/traces takes POST")
            await self._export(scope, receive, send)
        except _BadRequest as bad:
            self.requests_rejected += 1
            body = orjson.dumps({"code": 3, "message": bad.reason})
            await _respond(send, bad.status, "application/json", body)

    async def _export(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if self._token is not None:
            given = headers.get("authorization", "")
            expected = b"Bearer " + self._token
            if not hmac.compare_digest(given.encode("latin-1"), expected):
                raise _BadRequest(401, "missing or wrong bearer token in Authorization header")
        ctype = headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype in _PROTO_TYPES:
            is_json = False
        elif ctype in _JSON_TYPES:
            is_json = True
        else:
            raise _BadRequest(
                415,
                f"content type {ctype or '(none)'!r} is not OTLP; use application/x-protobuf "
                "or application/json",
            )
        encoding = headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("identity", "gzip", ""):
            raise _BadRequest(415, f"content encoding {encoding!r} is not supported; use gzip")
        length = headers.get("content-length")
        if length and length.isdigit() and int(length) > self.max_body_bytes:
            raise _BadRequest(
                413, f"body of {length} bytes is over the limit of {self.max_body_bytes} bytes"
            )
        body = await self._read_body(receive)
        if encoding == "gzip":
            body = self._gunzip(body)
        warnings = Warnings()
        spans, total = self._decode(body, is_json, warnings)
        rejected = total - len(spans)
        # The one place content leaves a span on its way to the store, for every format.
        dropped = self._content.drop(spans) if self._content is not None else 0
        if spans:
            loop = asyncio.get_running_loop()
            future: asyncio.Future[int | BaseException] = loop.create_future()

            def done(result: int | BaseException) -> None:
                loop.call_soon_threadsafe(_settle, future, result)

            self._writer.submit(spans, done)
            result = await future
            if isinstance(result, BaseException):
                await _respond(
                    send,
                    503,
                    "application/json",
                    orjson.dumps({"code": 14, "message": f"store unavailable: {result}"}),
                )
                return
            self.spans_stored += len(spans)
            self.content_attributes_dropped += dropped
        self.spans_rejected += rejected
        message = "; ".join(warnings.messages) if rejected else ""
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

    async def _read_body(self, receive: Receive) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _BadRequest(400, "client disconnected before the body was complete")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise _BadRequest(413, f"body is over the limit of {self.max_body_bytes} bytes")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _gunzip(self, body: bytes) -> bytes:
        decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            out = decompressor.decompress(body, self.max_body_bytes + 1)
        except zlib.error as exc:
            raise _BadRequest(400, f"body is not valid gzip ({exc})") from exc
        if len(out) > self.max_body_bytes or decompressor.unconsumed_tail:
            raise _BadRequest(
                413, f"gzip body expands past the limit of {self.max_body_bytes} bytes"
            )
        if not decompressor.eof:
            raise _BadRequest(400, "gzip body is truncated")
        return out

    def _decode(self, body: bytes, is_json: bool, warnings: Warnings) -> tuple[list[Span], int]:
        if is_json:
            try:
                obj = orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                raise _BadRequest(400, f"body is not valid JSON ({exc})") from exc
            if not isinstance(obj, dict) or not isinstance(obj.get("resourceSpans"), list):
                raise _BadRequest(
                    400,
                    'JSON body is not an OTLP export request: expected {"resourceSpans": [...]}',
                )
            total = _count_json_spans(obj)
            spans = list(spans_from_otlp_json(obj, warnings))
            return spans, total
        try:
            request = ExportTraceServiceRequest.FromString(body)
        except DecodeError as exc:
            raise _BadRequest(400, f"body is not a valid OTLP protobuf message ({exc})") from exc
        from google.protobuf import unknown_fields

        if len(unknown_fields.UnknownFieldSet(request)):
            raise _BadRequest(400, "body is not an OTLP ExportTraceServiceRequest")
        total = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        spans = list(spans_from_otlp_proto(request, warnings))
        return spans, total


def _count_json_spans(obj: dict[str, Any]) -> int:
    total = 0
    for rs in obj["resourceSpans"]:
        if isinstance(rs, dict):
            for ss in rs.get("scopeSpans") or []:
                if isinstance(ss, dict) and isinstance(ss.get("spans"), list):
                    total += len(ss["spans"])
    return total


def _settle(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():
        future.set_result(result)


async def _respond(send: Send, status: int, ctype: str, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", ctype.encode()),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
