"""Per-span checks before the write: one span that can never be stored fails alone."""

from __future__ import annotations

import base64
import gzip

import pytest

from collector import MAX_VALUE_DEPTH
from collector.decode import Decoded, RequestError, decode_body
from tests.collector import bodies as b
from tracer import attributes as attrs


def _decode(body: bytes, is_json: bool, gzipped: bool = False) -> Decoded:
    return decode_body(
        [body], is_json=is_json, gzipped=gzipped, max_body_bytes=1 << 22, content=None
    )


def _proto(request) -> Decoded:
    return _decode(request.SerializeToString(), is_json=False)


def _json(obj) -> Decoded:
    return _decode(b.dumps(obj), is_json=True)


def _assert_one_rejected(decoded: Decoded, reason: str, total: int = 3) -> None:
    assert decoded.total == total
    assert len(decoded.rows) == total - 1, decoded.rejections.message()
    assert decoded.rejections.count == 1
    assert reason in decoded.rejections.message()


def test_protobuf_time_at_2_pow_63_is_rejected_alone():
    request = b.proto_request(3)
    request.resource_spans[0].scope_spans[0].spans[1].end_time_unix_nano = 2**63
    _assert_one_rejected(_proto(request), "end time is not between 1970 and 2200")


def test_json_time_past_int64_is_rejected_alone():
    decoded = _json(b.json_batch(3, span1={"endTimeUnixNano": str(2**64 + 5)}))
    _assert_one_rejected(decoded, "end time is not between 1970 and 2200")


def test_json_int_value_wider_than_64_bits_is_rejected_alone():
    wide = {"key": "n", "value": {"intValue": "1" + "0" * 25}}
    decoded = _json(b.json_batch(3, span1={"attributes": [wide]}))
    _assert_one_rejected(decoded, "integer attribute value does not fit in 64 bits")


@pytest.mark.parametrize("kind", ["kvlist", "array"])
def test_protobuf_nesting_up_to_the_limit_is_stored_and_past_it_rejected(kind):
    request = b.proto_request(3)
    span = request.resource_spans[0].scope_spans[0].spans[1]
    attribute = span.attributes.add()
    attribute.key = "deep"
    b.nested_proto_value(attribute.value, MAX_VALUE_DEPTH, kind)
    assert len(_proto(request).rows) == 3
    for depth in (MAX_VALUE_DEPTH + 1, MAX_VALUE_DEPTH + 2, 90, 300):
        decoded = _decode(b.deep_proto_span_bytes(depth, kind), is_json=False)
        _assert_one_rejected(decoded, f"nests deeper than {MAX_VALUE_DEPTH} levels")


@pytest.mark.parametrize(
    ("kind", "deepest"),
    # As deep as the JSON parser reads (1,024 levels of JSON: 4 per key-value list, 3 per
    # array); deeper still, the whole body is not JSON the collector can read (400).
    [("kvlistValue", 250), ("arrayValue", 300)],
)
def test_json_nesting_up_to_the_limit_is_stored_and_past_it_rejected(kind, deepest):
    def with_depth(depth: int) -> Decoded:
        attribute = {"key": "deep", "value": b.DEEP}
        body = b.dumps(b.json_batch(3, span1={"attributes": [attribute]}))
        return _decode(body.replace(b.dumps(b.DEEP), b.nested_json_value(depth, kind)), True)

    assert len(with_depth(MAX_VALUE_DEPTH).rows) == 3
    for depth in (MAX_VALUE_DEPTH + 1, 90, deepest):
        _assert_one_rejected(with_depth(depth), f"nests deeper than {MAX_VALUE_DEPTH} levels")


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("traceId", "z" * 32, "trace id is not 32 hex digits"),
        ("traceId", "é" * 32, "trace id is not 32 hex digits"),
        ("spanId", "zzzzzzzzzzzzzzzz", "span id is not 16 hex digits"),
        ("spanId", "\u0663" * 16, "span id is not 16 hex digits"),  # Arabic-Indic digits
        ("traceId", "0" * 32, "trace id is all zeros"),
        ("spanId", 12, "span id is not a string"),
        ("parentSpanId", "abc", "parent span id is not 16 hex digits"),
        ("parentSpanId", "0" * 16, "parent span id is all zeros"),
        ("parentSpanId", "ab" * 9, "parent span id is not 16 hex digits"),
    ],
)
def test_json_bad_ids_are_rejected_alone(field, value, reason):
    _assert_one_rejected(_json(b.json_batch(3, span1={field: value})), reason)


def test_json_base64_ids_are_accepted():
    trace = b.new_trace_id()
    raw = {"traceId": base64.b64encode(trace).decode(), "spanId": "AAAAAAAAAAc="}
    decoded = _json(b.json_batch(3, span1=raw))
    assert len(decoded.rows) == 3
    assert (trace.hex(), "0000000000000007") in {(r[0], r[1]) for r in decoded.rows}


def test_protobuf_all_zero_span_id_is_rejected_alone():
    request = b.proto_request(3)
    request.resource_spans[0].scope_spans[0].spans[2].span_id = bytes(8)
    _assert_one_rejected(_proto(request), "span id is not 8 bytes or is all zeros")


def test_protobuf_parent_id_of_3_bytes_is_rejected_not_made_a_root():
    request = b.proto_request(3)
    request.resource_spans[0].scope_spans[0].spans[2].parent_span_id = b"\x01\x02\x03"
    decoded = _proto(request)
    _assert_one_rejected(decoded, "parent span id is not 8 bytes")
    assert [r[2] for r in decoded.rows] == [None, "0000000000000001"]


def test_json_resource_that_is_not_an_object_rejects_only_its_spans():
    good = b.json_batch(2)["resourceSpans"][0]
    bad = b.json_batch(3)["resourceSpans"][0]
    bad["resource"] = [1]
    decoded = _json({"resourceSpans": [bad, good]})
    assert decoded.total == 5 and len(decoded.rows) == 2 and decoded.rejections.count == 3
    assert "its resource is not an object" in decoded.rejections.message()


def test_json_key_that_is_not_a_string_is_rejected_alone():
    keyless = {"key": "kv", "value": {"kvlistValue": {"values": [{"value": {"intValue": "1"}}]}}}
    decoded = _json(b.json_batch(3, span1={"attributes": [keyless]}))
    _assert_one_rejected(decoded, "key that is not a string")


@pytest.mark.parametrize("is_json", [True, False])
def test_an_infinite_time_to_first_chunk_is_stored_without_a_first_token_mark(is_json):
    # The decoder does not believe a first-token time that is not finite: the span is
    # stored, without a mark, and the rest of the batch with it.
    if is_json:
        infinite = {"key": attrs.GEN_AI_TIME_TO_FIRST_CHUNK, "value": {"doubleValue": "Infinity"}}
        decoded = _json(b.json_batch(3, span1={"attributes": [infinite]}))
    else:
        request = b.proto_request(3)
        attribute = request.resource_spans[0].scope_spans[0].spans[1].attributes.add()
        attribute.key = attrs.GEN_AI_TIME_TO_FIRST_CHUNK
        attribute.value.double_value = float("inf")
        decoded = _proto(request)
    assert decoded.total == 3 and len(decoded.rows) == 3
    assert [row[10] for row in decoded.rows] == [None, None, None]


def test_every_gzip_member_is_read():
    first, second = b.proto_request(3), b.proto_request(2)
    body = b.two_gzip_members(first.SerializeToString(), second.SerializeToString())
    decoded = _decode(body, is_json=False, gzipped=True)
    assert decoded.total == 5 and len(decoded.rows) == 5


def test_gzip_member_followed_by_garbage_is_refused():
    body = gzip.compress(b.proto_request(1).SerializeToString()) + b"not gzip"
    with pytest.raises(RequestError) as caught:
        _decode(body, is_json=False, gzipped=True)
    assert caught.value.status == 400


def test_json_body_nested_past_the_parser_limit_is_refused_whole():
    body = b"[" * 2000 + b"]" * 2000
    with pytest.raises(RequestError) as caught:
        _decode(body, is_json=True)
    assert caught.value.status == 400


def test_reasons_name_the_first_bad_value_once_per_reason():
    spans = b.json_batch(4, span1={"spanId": "z" * 16}, span2={"spanId": "y" * 16})
    decoded = _json(spans)
    assert decoded.rejections.count == 2
    assert decoded.rejections.message() == (
        "2 spans: span id is not 16 hex digits or base64 of 8 bytes (first: 'zzzzzzzzzzzzzzzz')"
    )
