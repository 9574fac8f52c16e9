"""No body makes the decoder raise anything but a 4xx: odd values anywhere in a good
OTLP JSON body, and damaged protobuf bodies, are answered (hypothesis)."""

from __future__ import annotations

import copy
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector.decode import Decoded, RequestError, decode_body
from tests.collector import bodies as b

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
    st.sampled_from(
        ["", "0" * 16, "0" * 32, "zz" * 8, "Infinity", "-1", "1e400", "SPAN_KIND_SERVER"]
    ),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=12), inner, max_size=3)
    ),
    max_leaves=8,
)
#: Where in a good body an odd value goes: a path of keys and list indexes.
_PLACES = [
    ("resourceSpans", 0),
    ("resourceSpans", 0, "resource"),
    ("resourceSpans", 0, "resource", "attributes"),
    ("resourceSpans", 0, "resource", "attributes", 0, "value"),
    ("resourceSpans", 0, "scopeSpans"),
    ("resourceSpans", 0, "scopeSpans", 0, "spans"),
    ("resourceSpans", 0, "scopeSpans", 0, "spans", 1),
    *[
        ("resourceSpans", 0, "scopeSpans", 0, "spans", 1, key)
        for key in (
            "traceId",
            "spanId",
            "parentSpanId",
            "name",
            "kind",
            "startTimeUnixNano",
            "endTimeUnixNano",
            "attributes",
            "events",
            "status",
        )
    ],
    ("resourceSpans", 0, "scopeSpans", 0, "spans", 1, "attributes", 0),
    ("resourceSpans", 0, "scopeSpans", 0, "spans", 1, "attributes", 0, "key"),
    ("resourceSpans", 0, "scopeSpans", 0, "spans", 1, "attributes", 0, "value"),
    ("resourceSpans", 0, "scopeSpans", 0, "spans", 1, "events", 0),
    ("resourceSpans", 0, "scopeSpans", 0, "spans", 1, "events", 0, "timeUnixNano"),
    ("resourceSpans", 0, "scopeSpans", 0, "spans", 1, "status", "code"),
]
_GOOD = b.json_batch(3, span1={"events": [{"name": "hoptrace.first_token", "timeUnixNano": "1"}],
                               "status": {"code": 1}})  # fmt: skip


def _decode(body: bytes, is_json: bool) -> Decoded | None:
    try:
        return decode_body(
            [body], is_json=is_json, gzipped=False, max_body_bytes=1 << 20, content=None
        )
    except RequestError as refused:
        assert 400 <= refused.status < 500, refused.reason
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(place=st.sampled_from(_PLACES), value=_VALUES)
def test_any_value_anywhere_in_a_json_body_is_answered(place, value):
    body = copy.deepcopy(_GOOD)
    target = body
    for key in place[:-1]:
        target = target[key]
    target[place[-1]] = value
    decoded = _decode(json.dumps(body).encode(), is_json=True)  # orjson stops at 64 bits
    if decoded is not None:
        assert len(decoded.rows) + decoded.rejections.count == decoded.total
        assert {r[0] for r in decoded.rows} <= {
            _GOOD["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]
        }


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_damaged_protobuf_body_is_answered(data):
    good = bytearray(b.proto_request(3).SerializeToString())
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(good) - 1))
        good[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(good)))
    decoded = _decode(bytes(good[:cut]), is_json=False)
    if decoded is not None:
        assert len(decoded.rows) + decoded.rejections.count == decoded.total
