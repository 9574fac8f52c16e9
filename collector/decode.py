"""An OTLP/HTTP request body -> store rows, with the spans rejected and why.

Runs off the event loop, one body at a time. Every gzip member is read. A body that
is not OTLP at all (not JSON, not protobuf, not an export request) raises
:class:`RequestError` with a 4xx; inside a good body, each span is decoded and checked
alone (:mod:`collector.validate`), so a span that cannot be stored is rejected with a
reason and the others become rows. Nothing here raises anything else for any body.

Spans become rows as they are decoded, so a body's decoded spans are never all in
memory at once: what a request holds is its body, the parsed message and its rows.

The spans a sender says it dropped (:data:`tracer.attributes.SPANS_DROPPED` on a
resource) are added up for the receiver's ``/healthz``.
"""

from __future__ import annotations

import codecs
import logging
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from google.protobuf import unknown_fields
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector._wire import WireError, split_field
from collector.content import ContentFilter
from collector.store import span_row
from collector.validate import MAX_VALUE_DEPTH, Rejections, json_id_problem, span_problem
from tracer.attributes import SPANS_DROPPED
from tracer.spans.model import Span, Warnings
from tracer.spans.otlp import spans_from_otlp_json, spans_from_otlp_proto

__all__ = ["Decoded", "RequestError", "decode_body", "gunzip"]

_logger = logging.getLogger(__name__)
_TOO_DEEP = f"an attribute value nests deeper than {MAX_VALUE_DEPTH} levels"


class RequestError(Exception):
    """The request as a whole is refused: ``status`` and ``reason`` for the answer."""

    def __init__(self, status: int, reason: str, retry_after_s: int | None = None):
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.retry_after_s = retry_after_s


@dataclass(slots=True)
class Decoded:
    """The rows to store from one body, how many spans it held, what was rejected, and
    how many spans its senders said they dropped."""

    rows: list[tuple]
    total: int
    rejections: Rejections = field(default_factory=Rejections)
    content_dropped: int = 0
    sender_dropped: int = 0


def gunzip(body: bytes, limit: int) -> bytes:
    """Every member of a gzip body, joined; at most ``limit`` bytes out.

    Raises:
        RequestError: 400 for broken or truncated gzip, 413 past ``limit``.
    """
    out: list[bytes] = []
    size = 0
    data = body
    while True:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            chunk = inflater.decompress(data, limit - size + 1)
        except zlib.error as exc:
            raise RequestError(400, f"body is not valid gzip ({exc})") from exc
        size += len(chunk)
        if size > limit or inflater.unconsumed_tail:
            raise RequestError(413, f"gzip body expands past the limit of {limit} bytes")
        if not inflater.eof:
            raise RequestError(400, "gzip body is truncated")
        out.append(chunk)
        data = inflater.unused_data
        if not data.strip(b"\0"):  # the end, or zero padding after the last member
            return b"".join(out)


def decode_body(
    box: list[bytes],
    *,
    is_json: bool,
    gzipped: bool,
    max_body_bytes: int,
    content: ContentFilter | None,
    grow: Callable[[int], bool] | None = None,
) -> Decoded:
    """Decode, check and turn into rows the spans of one request body.

    Args:
        box: a list holding the body as received; it is taken out, so the body's
            memory goes as soon as it is parsed.
        is_json: OTLP JSON (else protobuf).
        gzipped: the body is gzip-encoded (``Content-Encoding: gzip``).
        max_body_bytes: the largest body after gzip.
        content: drops prompt and completion attributes (None keeps them).
        grow: called with the size after gzip; False refuses the request with 503
            (the memory it needs is not free).

    Raises:
        RequestError: the body as a whole is not OTLP (4xx), or no memory (503).
    """
    body = box.pop()
    if gzipped:
        body = gunzip(body, max_body_bytes)
        if grow is not None and not grow(len(body)):
            raise RequestError(503, "the collector is at its memory limit", retry_after_s=1)
    before = Rejections()
    units: _JsonUnits | _ProtoUnits
    if is_json:
        units, total = _json_units(body, before)
        decoder: Callable[[Any, Warnings], Iterator[Span]] = spans_from_otlp_json
    else:
        units, total = _proto_units(body, before)
        decoder = spans_from_otlp_proto
    del body
    warnings = Warnings()
    rejections = before.copy()
    try:
        decoded = _rows(decoder(units.whole(), warnings), content, rejections)
    except Exception:  # one span the decoder trips on: decode them one at a time
        warnings = Warnings()
        rejections = before.copy()
        spans = _one_by_one(decoder, units.each(), warnings, rejections)
        decoded = _rows(spans, content, rejections)
    decoded.total = total
    decoded.sender_dropped = units.sender_dropped
    if warnings.skipped_spans:
        reason = "; ".join(m.removesuffix(" were skipped") for m in warnings.messages)
        rejections.add(reason or "unusable spans", None, warnings.skipped_spans)
    return decoded


def _rows(spans: Iterable[Span], content: ContentFilter | None, rejections: Rejections) -> Decoded:
    rows = []
    dropped = 0
    for span in spans:
        if content is not None:
            dropped += content.drop((span,))
        problem = span_problem(span)
        if problem is not None:
            rejections.add(*problem)
            continue
        try:
            rows.append(span_row(span))
        except (TypeError, ValueError) as exc:  # orjson's JSONEncodeError is a TypeError
            rejections.add("its attributes cannot be stored as JSON", str(exc))
    return Decoded(rows, 0, rejections, dropped)


def _one_by_one(
    decoder: Callable[[Any, Warnings], Iterator[Span]],
    units: Iterable[Any],
    warnings: Warnings,
    rejections: Rejections,
) -> Iterator[Span]:
    for one in units:
        try:
            spans = list(decoder(one, warnings))
        except Exception as exc:
            rejections.add("the span could not be decoded", f"{type(exc).__name__}: {exc}")
            _logger.debug("a span could not be decoded", exc_info=True)
            continue
        yield from spans


class _JsonUnits:
    """The checked spans of a JSON body: all at once, or one request per span."""

    def __init__(self, kept: list[dict[str, Any]], sender_dropped: int):
        self._kept = kept
        self.sender_dropped = sender_dropped

    def whole(self) -> dict[str, Any]:
        return {"resourceSpans": self._kept}

    def each(self) -> Iterator[dict[str, Any]]:
        for rs in self._kept:
            for ss in rs["scopeSpans"]:
                for raw in ss["spans"]:
                    scope = {"spans": [raw]}
                    yield {"resourceSpans": [{"resource": rs["resource"], "scopeSpans": [scope]}]}


#: Put where a body's bytes are not UTF-8 (a noncharacter, which no exporter sends),
#: so that the span holding them can be found and rejected alone.
_NOT_UTF8 = "\ufdd0"
_NOT_UTF8_BYTES = _NOT_UTF8.encode()
codecs.register_error("hoptrace-not-utf8", lambda exc: (_NOT_UTF8, exc.end))  # type: ignore[attr-defined]


def _json_units(body: bytes, rejections: Rejections) -> tuple[_JsonUnits, int]:
    marked = False
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if "UTF-8" not in str(exc):
            raise RequestError(400, f"body is not valid JSON ({exc})") from exc
        # A string that is not UTF-8 costs its span, as in protobuf: mark the bytes.
        marked = True
        try:
            obj = orjson.loads(body.decode("utf-8", errors="hoptrace-not-utf8"))
        except orjson.JSONDecodeError as again:
            raise RequestError(400, f"body is not valid JSON ({again})") from again
    if not isinstance(obj, dict) or not isinstance(obj.get("resourceSpans"), list):
        raise RequestError(
            400, 'JSON body is not an OTLP export request: expected {"resourceSpans": [...]}'
        )
    total = 0
    sender_dropped = 0
    kept: list[dict[str, Any]] = []
    for rs in obj["resourceSpans"]:
        if type(rs) is not dict:
            continue
        resource = rs.get("resource")
        if type(resource) is dict:
            sender_dropped += _json_dropped(resource.get("attributes"))
        scopes = rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []
        good_scopes = []
        for ss in scopes if type(scopes) is list else []:
            spans = ss.get("spans") if type(ss) is dict else None
            if type(spans) is not list:
                continue
            total += len(spans)
            if resource is not None and type(resource) is not dict:
                rejections.add("its resource is not an object", resource, spans=len(spans))
                continue
            if marked and _not_utf8(resource):
                rejections.add(
                    "its resource holds a string that is not valid UTF-8", None, len(spans)
                )
                continue
            good = [
                raw
                for raw in spans
                if _json_span_ok(raw, rejections)
                and not (marked and _span_not_utf8(raw, rejections))
            ]
            if good:
                good_scopes.append({"spans": good})
        if good_scopes:
            kept.append({"resource": resource, "scopeSpans": good_scopes})
    return _JsonUnits(kept, sender_dropped), total


def _not_utf8(value: Any) -> bool:
    return _NOT_UTF8_BYTES in orjson.dumps(value)


def _span_not_utf8(raw: Any, rejections: Rejections) -> bool:
    if _not_utf8(raw):
        rejections.add("the span holds a string that is not valid UTF-8")
        return True
    return False


def _json_dropped(attributes: Any) -> int:
    """The :data:`SPANS_DROPPED` count among a JSON resource's attributes (0 if none)."""
    for kv in attributes if type(attributes) is list else ():
        if type(kv) is dict and kv.get("key") == SPANS_DROPPED:
            value = kv.get("value")
            raw = value.get("intValue") if type(value) is dict else None
            if type(raw) is int or (type(raw) is str and raw.isdigit()):
                return max(int(raw), 0)
    return 0


_JSON_IDS = (
    ("traceId", 16, "trace id", False),
    ("spanId", 8, "span id", False),
    ("parentSpanId", 8, "parent span id", True),
)


def _json_span_ok(raw: Any, rejections: Rejections) -> bool:
    if type(raw) is not dict:
        rejections.add("a span is not an object", raw)
        return False
    for key, n_bytes, what, optional in _JSON_IDS:
        value = raw.get(key)
        problem = json_id_problem(value, n_bytes, what, optional)
        if problem is not None:
            rejections.add(problem, value)
            return False
    return True


class _ProtoUnits:
    """The spans of a protobuf request: all at once, or one request per span."""

    def __init__(self, request: ExportTraceServiceRequest):
        self._request = request
        self.sender_dropped = sum(
            max(kv.value.int_value, 0)
            for rs in request.resource_spans
            for kv in rs.resource.attributes
            if kv.key == SPANS_DROPPED and kv.value.WhichOneof("value") == "int_value"
        )

    def whole(self) -> ExportTraceServiceRequest:
        return self._request

    def each(self) -> Iterator[ExportTraceServiceRequest]:
        for rs in self._request.resource_spans:
            for ss in rs.scope_spans:
                for raw in ss.spans:
                    one = ExportTraceServiceRequest()
                    part = one.resource_spans.add()
                    part.resource.CopyFrom(rs.resource)
                    part.scope_spans.add().spans.add().CopyFrom(raw)
                    yield one


def _proto_units(body: bytes, rejections: Rejections) -> tuple[_ProtoUnits, int]:
    try:
        request = ExportTraceServiceRequest.FromString(body)
    except DecodeError as exc:
        if _part_problem(exc) is None:
            raise RequestError(400, f"body is not a valid OTLP protobuf message ({exc})") from exc
        request, total = _salvage(body, rejections)
    else:
        if len(unknown_fields.UnknownFieldSet(request)):
            raise RequestError(400, "body is not an OTLP ExportTraceServiceRequest")
        total = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    return _ProtoUnits(request), total


def _part_problem(exc: DecodeError) -> str | None:
    """What a parse error says of one part (a span, a resource), when reading the parts
    alone can keep the others: nesting past the parser's depth, a string that is not
    UTF-8. None: the bytes are broken as a whole."""
    text = str(exc)
    if "MaxDepth" in text:
        return f"nests deeper than {MAX_VALUE_DEPTH} levels"
    if "UTF-8" in text:
        return "holds a string that is not valid UTF-8"
    return None


def _salvage(body: bytes, rejections: Rejections) -> tuple[ExportTraceServiceRequest, int]:
    """The request rebuilt from the parts the protobuf parser can read one at a time.

    The parser stops at a nesting depth counted from the request; read alone, a span
    gets the levels above it back, and one nested deeper still is rejected alone. A
    string that is not UTF-8 (proto3 ``string`` fields must be) makes the parser refuse
    the whole request; read alone, it costs only the span (or the resource's or
    scope's spans) that holds it.
    """
    out = ExportTraceServiceRequest()
    total = 0
    try:
        for rs_bytes in split_field(body, 1)[1]:
            rs_rest, scopes = split_field(rs_bytes, 2)
            parts = [split_field(ss_bytes, 2) for ss_bytes in scopes]
            n_spans = sum(len(spans) for _, spans in parts)
            total += n_spans
            rs = out.resource_spans.add()
            problem = _merge(rs, rs_rest)
            if problem is not None:
                rejections.add(f"its resource {problem}", None, n_spans)
                del out.resource_spans[-1]
                continue
            for ss_rest, spans in parts:
                ss = rs.scope_spans.add()
                problem = _merge(ss, ss_rest)
                if problem is not None:
                    rejections.add(f"its scope {problem}", None, len(spans))
                    del rs.scope_spans[-1]
                    continue
                for raw in spans:
                    problem = _merge(ss.spans.add(), raw)
                    if problem is not None:
                        rejections.add(_TOO_DEEP if "deeper" in problem else f"the span {problem}")
                        del ss.spans[-1]
    except WireError as exc:
        raise RequestError(400, f"body is not a valid OTLP protobuf message ({exc})") from exc
    return out, total


def _merge(message: Any, data: bytes) -> str | None:
    """Parse ``data`` into ``message``; what is wrong with it when it cannot be read
    alone (:func:`_part_problem`), else None.

    Raises:
        WireError: ``data`` is broken in another way.
    """
    try:
        message.MergeFromString(data)
    except DecodeError as exc:
        problem = _part_problem(exc)
        if problem is None:
            raise WireError(str(exc)) from exc
        return problem
    return None
