"""The OTLP JSON fast path gives the same spans, and the same skips, as the careful path."""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracer import attributes as attrs
from tracer.spans import Warnings
from tracer.spans.otlp import _span_from_json_careful, _spans_from_json

_HEX = "0123456789abcdef"


def _ids(width: int) -> st.SearchStrategy:
    hex_id = st.text(_HEX, min_size=width, max_size=width)
    return st.one_of(
        hex_id,
        hex_id.map(str.upper),
        st.text(_HEX, min_size=1, max_size=width - 1),
        st.just("0" * width),
        st.just(""),
        st.just("AAAAAAAAAAE="),  # base64 of 8 bytes
        st.just("AAAAAAAAAAAAAAAAAAAAAQ=="),  # base64 of 16 bytes
        st.just("g" * width),
        st.integers(min_value=-2, max_value=2**70),
        st.none(),
        st.just([]),
        st.just({}),
        st.booleans(),
    )


_times = st.one_of(
    st.integers(min_value=-5, max_value=2**63),
    st.integers(min_value=1, max_value=10**19).map(str),
    st.just(""),
    st.just("x"),
    st.none(),
    st.floats(min_value=0, max_value=1e19, allow_nan=False),
)
_event_names = st.sampled_from(
    [
        attrs.FIRST_TOKEN_EVENT,
        attrs.CHUNK_EVENT,
        attrs.TRITON_QUEUE_START,
        attrs.TRITON_COMPUTE_START,
        attrs.TRITON_COMPUTE_END,
        "other",
    ]
)
_event = st.one_of(
    st.fixed_dictionaries(
        {"name": _event_names},
        optional={"timeUnixNano": st.one_of(_times, st.integers(-5, 10))},
    ),
    st.just("not an event"),
    st.fixed_dictionaries({"name": st.one_of(st.none(), st.integers())}),
)
_value = st.one_of(
    st.fixed_dictionaries({"stringValue": st.text(max_size=3)}),
    st.fixed_dictionaries({"intValue": st.one_of(st.integers(), st.text(max_size=3))}),
    st.fixed_dictionaries({"doubleValue": st.floats(allow_nan=False)}),
    st.fixed_dictionaries({"boolValue": st.booleans()}),
    st.none(),
    st.integers(),
)
_attr = st.one_of(
    st.fixed_dictionaries(
        {
            "key": st.sampled_from(
                [attrs.STAGE, "k", attrs.GEN_AI_TIME_TO_FIRST_CHUNK, attrs.GEN_AI_LATENCY_TTFT]
            ),
            "value": _value,
        }
    ),
    st.just({"key": "k"}),
    st.just("x"),
)
_status = st.one_of(
    st.none(),
    st.just("ok"),
    st.fixed_dictionaries(
        {},
        optional={
            "code": st.one_of(
                st.integers(-1, 3),
                st.sampled_from(["STATUS_CODE_ERROR", "x", 2.0, 1.5, True]),
                st.none(),
            )
        },
    ),
)


def _mostly(valid: st.SearchStrategy, odd: st.SearchStrategy) -> st.SearchStrategy:
    # Mostly well-formed values, so that a span has one or two odd fields at a time.
    return st.one_of(valid, valid, valid, odd)


_valid_time = st.integers(min_value=1, max_value=3).map(lambda t: 1_700_000_000_000_000_000 + t)
_ABSENT = object()
_span = st.fixed_dictionaries(
    {
        "traceId": _mostly(st.sampled_from(["a" * 32, "1" * 32]), _ids(32) | st.just(_ABSENT)),
        "spanId": _mostly(st.text(_HEX, min_size=16, max_size=16), _ids(16) | st.just(_ABSENT)),
        "startTimeUnixNano": _mostly(_valid_time, _times | st.just(_ABSENT)),
        "endTimeUnixNano": _mostly(_valid_time.map(lambda t: t + 10), _times | st.just(_ABSENT)),
    },
    optional={
        "parentSpanId": _mostly(st.sampled_from(["b" * 16, "2" * 16]), _ids(16)),
        "kind": st.one_of(
            st.integers(-1, 7),
            st.sampled_from(["SPAN_KIND_CLIENT", "server", "3"]),
            st.none(),
            st.booleans(),
            st.sampled_from([3.0, 2.5, -1.0]),
        ),
        "name": st.one_of(st.text(max_size=3), st.none(), st.integers()),
        "attributes": st.one_of(st.lists(_attr, max_size=4), st.none(), st.just({})),
        "events": st.one_of(
            st.lists(_event, max_size=4), st.none(), st.just({"a": 1}), st.just("e")
        ),
        "status": _status,
    },
).map(lambda raw: {k: v for k, v in raw.items() if v is not _ABSENT})


def _careful(raws):
    warnings = Warnings()
    out = []
    for raw in raws:
        span = _span_from_json_careful(raw, "svc", warnings)
        if span is not None:
            out.append(span)
    return out, warnings


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_span, st.none(), st.just([])), max_size=5))
def test_fast_path_equals_careful_path_for_any_span_dicts(raws):
    fast_warnings = Warnings()
    fast = list(_spans_from_json(copy.deepcopy(raws), "svc", fast_warnings))
    careful, careful_warnings = _careful(copy.deepcopy(raws))
    assert fast == careful
    assert [type(s.kind) for s in fast] == [type(s.kind) for s in careful]
    assert fast_warnings == careful_warnings


def test_a_kind_of_odd_digits_reads_as_unspecified():
    # "²" is a digit to str.isdigit but not to int(): it must not stop the loader.
    raw = {
        "traceId": "a" * 32,
        "spanId": "b" * 16,
        "startTimeUnixNano": 1,
        "endTimeUnixNano": 2,
        "kind": "²",
    }
    warnings = Warnings()
    (span,) = _spans_from_json([raw], "svc", warnings)
    assert span.kind == 0
