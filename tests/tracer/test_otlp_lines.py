"""The typed decoder of OTLP JSON lines gives the general path's spans, or steps aside.

``traces_from_otlp_line`` is the big-file fast path: for any line it either returns
exactly the spans that ``orjson`` plus ``spans_from_otlp_json`` give (by trace id), with nothing
the general path would warn about, or None (and the caller takes the general path).
"""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.tracer.test_otlp_fast_path import _HEX, _event, _span, _value
from tracer.analysis.loaders.files import LINE_BAD, LINE_GOOD, LINE_UNKNOWN, add_line
from tracer.analysis.model.traceset import TraceSet
from tracer.spans import Warnings
from tracer.spans._numbers import NUMERIC_KEYS
from tracer.spans._otlp_lines import traces_from_otlp_line
from tracer.spans.otlp import spans_from_otlp_json


@pytest.fixture(autouse=True, scope="module", params=["compiled", "typed"])
def decoder(request):
    """Every test here runs with the compiled decoder first (where it is built) and with
    the typed decoder alone (``HOPTRACE_NATIVE=off``)."""
    from tracer.spans import _otlp_lines

    saved = _otlp_lines._native_decode
    if request.param == "typed":
        _otlp_lines._native_decode = None
    elif saved is None:
        pytest.skip("the compiled decoder is not built here (no C compiler at install)")
    yield request.param
    _otlp_lines._native_decode = saved


_valid_time = st.integers(min_value=1, max_value=3).map(lambda t: 1_700_000_000_000_000_000 + t)
_good_value = st.one_of(
    st.fixed_dictionaries({"stringValue": st.text(max_size=3)}),
    st.fixed_dictionaries({"intValue": st.integers(-(2**63), 2**63 - 1).map(str)}),
    st.fixed_dictionaries({"doubleValue": st.floats(0, 10)}),
    st.fixed_dictionaries({"boolValue": st.booleans()}),
    st.fixed_dictionaries({"arrayValue": st.just({"values": [{"intValue": "1"}]})}),
    st.fixed_dictionaries({"kvlistValue": st.just({"values": [{"key": "a", "value": {}}]})}),
    st.just({}),
)
_good_attr = st.fixed_dictionaries(
    {
        "key": st.sampled_from(
            [
                "hoptrace.stage",
                "k",
                "gen_ai.response.time_to_first_chunk",
                "gen_ai.latency.time_to_first_token",
            ]
        ),
        "value": _good_value,
    }
)
#: Well-formed spans as exporters write them (the typed path takes these).
_good_span = st.fixed_dictionaries(
    {
        "traceId": st.sampled_from(["a" * 32, "1" * 32, "0af7651916cd43dd8448eb211c80319c"]),
        "spanId": st.text(_HEX, min_size=16, max_size=16),
        "startTimeUnixNano": _valid_time.map(str),
        "endTimeUnixNano": _valid_time.map(lambda t: str(t + 10)),
    },
    optional={
        "parentSpanId": st.sampled_from(["b" * 16, "2" * 16, ""]),
        "kind": st.one_of(st.integers(0, 5), st.sampled_from(["SPAN_KIND_CLIENT", "server"])),
        "name": st.text(max_size=3),
        "attributes": st.lists(_good_attr, max_size=4),
        "events": st.lists(_event.filter(lambda e: isinstance(e, dict)), max_size=3),
        "status": st.fixed_dictionaries({}, optional={"code": st.integers(0, 2)}),
        "droppedAttributesCount": st.integers(0, 3),
    },
)

_resource = st.one_of(
    st.none(),
    st.just({}),
    st.fixed_dictionaries(
        {
            "attributes": st.lists(
                st.fixed_dictionaries(
                    {"key": st.sampled_from(["service.name", "host"]), "value": _value}
                ),
                max_size=2,
            )
        }
    ),
)
_scopes_key = st.sampled_from(["scopeSpans", "scopeSpans", "instrumentationLibrarySpans"])


@st.composite
def _lines(draw) -> bytes:
    resources = []
    for _ in range(draw(st.integers(0, 2))):
        rs: dict = {
            draw(_scopes_key): [
                {
                    "scope": {"name": "x"},
                    "spans": draw(st.lists(_good_span | _good_span | _span, max_size=4)),
                }
                for _ in range(draw(st.integers(0, 2)))
            ]
        }
        resource = draw(_resource)
        if resource is not None:
            rs["resource"] = resource
        resources.append(rs)
    # json.dumps: ints past 64 bits and odd floats are written as they are.
    return json.dumps({"resourceSpans": resources}).encode()


def _general(line: bytes) -> tuple[dict, Warnings]:
    """The general path's spans of the line by trace id, as a loader groups them."""
    found = TraceSet()
    found.add(spans_from_otlp_json(orjson.loads(line), found.warnings))
    return found.traces, found.warnings


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_lines())
def test_typed_lines_equal_the_general_path_or_step_aside(line):
    typed = traces_from_otlp_line(line)
    try:
        general, warnings = _general(line)
    except orjson.JSONDecodeError:
        assert typed is None
        return
    if typed is not None:
        assert typed == general
        kinds = [type(s.kind) for spans in typed.values() for s in spans]
        assert kinds == [type(s.kind) for spans in general.values() for s in spans]
        assert not warnings.any, "the typed path kept a line the general path warns about"


def test_well_formed_lines_take_the_typed_path():
    span = {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "b7ad6b7169203331",
        "parentSpanId": "00f067aa0ba902b7",
        "name": "chat gpt-4o",
        "kind": 3,
        "startTimeUnixNano": "1750000000000000000",
        "endTimeUnixNano": "1750000001000000000",
        "attributes": [
            {"key": "hoptrace.stage", "value": {"stringValue": "inference"}},
            {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "12"}},
            {"key": "gen_ai.response.time_to_first_chunk", "value": {"doubleValue": 0.25}},
            {"key": "flags", "value": {"arrayValue": {"values": [{"boolValue": True}]}}},
        ],
        "events": [
            {"name": "hoptrace.first_token", "timeUnixNano": "1750000000300000000"},
            {"name": "QUEUE_START", "timeUnixNano": "1750000000100000000"},
        ],
        "links": [{"traceId": "1" * 32, "spanId": "2" * 16}],
        "status": {"code": 2, "message": "boom"},
    }
    line = json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {
                        "attributes": [{"key": "service.name", "value": {"stringValue": "app"}}]
                    },
                    "scopeSpans": [{"scope": {"name": "openai"}, "spans": [span]}],
                }
            ]
        }
    ).encode()
    typed = traces_from_otlp_line(line)
    assert typed is not None
    ((s,),) = typed.values()
    assert typed == _general(line)[0]
    assert (s.service, s.name, s.kind, s.stage, s.status) == (
        "app",
        "chat gpt-4o",
        3,
        "inference",
        2,
    )
    # The earliest mark: the time-to-first-chunk attribute (0.25 s) before the event.
    assert s.first_token_ns == 1_750_000_000_250_000_000
    assert s.attributes["gen_ai.usage.input_tokens"] == 12
    assert s.attributes["flags"] == [True]
    assert s.attributes["hoptrace.event_ns.QUEUE_START"] == 1_750_000_000_100_000_000


def test_other_shapes_and_odd_spans_step_aside():
    jaeger = b'{"data": [{"traceID": "a", "spans": [], "processes": {}}]}'
    upper = json.dumps(
        {
            "resourceSpans": [
                {
                    "scopeSpans": [
                        {
                            "spans": [
                                {
                                    "traceId": "A" * 32,
                                    "spanId": "b" * 16,
                                    "startTimeUnixNano": 1,
                                    "endTimeUnixNano": 2,
                                }
                            ]
                        }
                    ]
                }
            ]
        }
    ).encode()
    for line in (jaeger, upper, b"", b"   \n", b"{not json", b"[1, 2]"):
        assert traces_from_otlp_line(line) is None
    # add_line then reads them the general way: the upper-case id is normalised.
    sink = TraceSet()
    assert add_line(upper, sink, "f") == LINE_GOOD
    assert list(sink.traces) == ["a" * 32]
    assert add_line(b"{not json", sink, "f") == LINE_BAD
    assert add_line(b"[1, 2]", sink, "f") == LINE_UNKNOWN


def _one_span_line(**fields) -> bytes:
    span = {
        "traceId": "a" * 32,
        "spanId": "b" * 16,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000000000010",
        **fields,
    }
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()


def _attr_line(value) -> bytes:
    return _one_span_line(attributes=[{"key": "k", "value": value}])


_BIG = 2**70 + 1  # a JSON integer orjson reads as a float


#: Odd values, and whether the typed path takes each line (True) or steps aside.
_ODD_LINES = [
    # AnyValue with several fields set: the general path takes the first in the
    # line's order; with a null field it reads null as that field's value.
    _attr_line({"doubleValue": 2.5, "intValue": "1"}),
    _attr_line({"stringValue": None, "intValue": "3"}),
    _attr_line({"intValue": None, "doubleValue": 1.0}),
    _attr_line({"boolValue": None}),
    _attr_line({"arrayValue": None}),
    _attr_line({"kvlistValue": None}),
    (
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"'
        + b"a" * 32
        + b'","spanId":"'
        + b"b" * 16
        + b'","startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000000000000001",'
        b'"attributes":[{"key":"k","value":'
        b'{"doubleValue":1.5,"intValue":"1","doubleValue":null}}]}]}]}]}'
    ),
    # Strings msgspec reads as ints in lax mode, int() does not.
    _attr_line({"intValue": "1e3"}),
    _attr_line({"intValue": "3.0"}),
    _one_span_line(startTimeUnixNano="5.0", endTimeUnixNano="6"),
    _one_span_line(events=[{"name": "hoptrace.first_token", "timeUnixNano": "5.0"}]),
    _one_span_line(events=[{"name": "QUEUE_START", "timeUnixNano": "-5.0"}]),
    # JSON integers past 64 bits: orjson reads floats.
    _one_span_line(startTimeUnixNano=2**64 + 1, endTimeUnixNano=2**64 + 2),
    _attr_line({"intValue": _BIG}),
    _attr_line({"arrayValue": {"values": [{"intValue": _BIG}]}}),
    _attr_line({"kvlistValue": {"values": [{"key": "a", "value": {"intValue": _BIG}}]}}),
    _one_span_line(status={"code": _BIG}),
    _one_span_line(events=[{"name": "hoptrace.first_token", "timeUnixNano": _BIG}]),
]
_ODD_TAKEN = (False, True, False, True, True, True, False, True, True) + (False,) * 9


@pytest.mark.parametrize(("line", "taken"), list(zip(_ODD_LINES, _ODD_TAKEN, strict=True)))
def test_odd_values_equal_the_general_path_or_step_aside(line, taken):
    typed = traces_from_otlp_line(line)
    general, warnings = _general(line)
    assert (typed is not None) == taken
    assert typed is None or (typed == general and not warnings.any)


_odd_value = st.dictionaries(
    st.sampled_from(
        ["stringValue", "intValue", "doubleValue", "boolValue", "arrayValue", "kvlistValue"]
    ),
    st.one_of(
        st.none(),
        st.sampled_from(["x", "5", "1e3", "3.0", " 7", "1_0", str(_BIG)]),
        st.integers(-(2**80), 2**80),
        st.floats(allow_nan=False, allow_infinity=False),
        st.booleans(),
        st.just({"values": [{"intValue": _BIG}]}),
    ),
    max_size=3,
)


@settings(max_examples=500, deadline=None)
@given(_odd_value, st.sampled_from(["1700000000000000000", "5.0", 2**64 + 1, "1e3"]))
def test_odd_values_and_times_random(value, time):
    line = _one_span_line(
        attributes=[{"key": "k", "value": value}],
        events=[{"name": "hoptrace.first_token", "timeUnixNano": time}],
    )
    typed = traces_from_otlp_line(line)
    general, warnings = _general(line)
    assert typed is None or (typed == general and not warnings.any)
    ((field, raw),) = value.items() if len(value) == 1 else ((None, None),)
    plain = time == "1700000000000000000" and (
        (field == "stringValue" and type(raw) is str)
        or (field == "boolValue" and type(raw) is bool)
        or (field == "intValue" and type(raw) is int and abs(raw) < 2**63)
    )
    if plain:  # one plain value: the typed path (and the compiled one) must take it
        assert typed is not None, line


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(sorted(NUMERIC_KEYS) + ["k"]),
    st.sampled_from(["doubleValue", "intValue"]),
    st.one_of(
        st.floats(allow_nan=False, allow_infinity=False),
        st.floats(-2e12, 2e12),
        st.integers(-(10**13), 10**13),
        st.sampled_from(["600", "-3", "1e3", "NaN", "Infinity", str(10**13)]),
    ),
)
def test_numeric_attributes_random(key, field, value):
    # Token counts and latencies within their bounds are kept without a call
    # (NUMBER_BOUNDS); at or past them, or odd, the line reads as the general path does.
    line = _one_span_line(attributes=[{"key": key, "value": {field: value}}])
    typed = traces_from_otlp_line(line)
    general, warnings = _general(line)
    assert typed is None or (repr(typed) == repr(general) and not warnings.any)  # (NaN)
    if key == "k" and (
        (field == "intValue" and type(value) is int)
        or (field == "doubleValue" and type(value) is float)
    ):  # a number under a key that is no number's: nothing to check, it must be taken
        assert typed is not None, line


#: Strings msgspec reads in lax mode as the general path does not: taken all the same.
_LAX_LINES = [
    # msgspec's lax mode reads the strings "null" (any case) as None and "-0" as 0.0
    # where a field may be null or is a float; the general path keeps the string or
    # reads float("-0"), which is -0.0. repr: -0.0 == 0.0.
    _attr_line({"doubleValue": "null"}),
    _attr_line({"doubleValue": "NULL"}),
    _attr_line({"doubleValue": "-0"}),
    _attr_line("null"),
    _attr_line("Null"),
    _attr_line("text"),
    json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {"attributes": [{"key": "service.name", "value": "null"}]},
                    "scopeSpans": [
                        {
                            "spans": [
                                json.loads(_one_span_line())["resourceSpans"][0]["scopeSpans"][0][
                                    "spans"
                                ][0]
                            ]
                        }
                    ],
                }
            ]
        }
    ).encode(),
]


@pytest.mark.parametrize("line", _LAX_LINES)
def test_lax_strings_read_as_the_general_path_reads_them(line):
    typed = traces_from_otlp_line(line)
    general, warnings = _general(line)
    assert typed is not None  # taken, and read as the general path reads it
    assert repr(typed) == repr(general) and not warnings.any


def test_deep_values_step_aside_without_a_recursion_error():
    # Within orjson's nesting limit (1024), past what the typed path recurses through.
    deep = {"stringValue": "x"}
    for _ in range(300):
        deep = {"arrayValue": {"values": [deep]}}
    links = "[" * 1000 + "]" * 1000
    for line in (
        _attr_line(deep),
        _one_span_line(links="LINKS").replace(b'"LINKS"', links.encode()),
    ):
        orjson.loads(line)  # JSON the general path reads
        assert traces_from_otlp_line(line) is None  # stepped aside, to the general path
        sink = TraceSet()
        assert add_line(line, sink, "f") == LINE_GOOD
        assert list(sink.traces) == ["a" * 32]


def test_spans_with_the_same_attribute_text_get_their_own_dicts_and_the_memo_is_bounded():
    from tracer.spans import _otlp_lines

    attributes = [
        {"key": "hoptrace.stage", "value": {"stringValue": "auth"}},
        {"key": "n", "value": {"intValue": "7"}},
    ]
    spans = [
        {
            "traceId": "a" * 32,
            "spanId": f"{i + 1:016x}",
            "startTimeUnixNano": "1700000000000000001",
            "endTimeUnixNano": "1700000000000000009",
            "attributes": attributes,
        }
        for i in range(3)
    ]
    line = orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})
    for _ in range(2):  # the second time, the text is remembered
        first, second, third = traces_from_otlp_line(line)["a" * 32]
        assert first.attributes == {"hoptrace.stage": "auth", "n": 7} == third.attributes
        assert first.stage == "auth" == third.stage
        first.attributes["n"] = 8  # one span's dict is its own, though decoded once
        assert second.attributes["n"] == 7 and third.attributes["n"] == 7
    seen = _otlp_lines._SEEN_ATTRIBUTES
    seen.clear()
    for i in range(_otlp_lines._SEEN_MAX + 50):  # as many different lists: not all kept
        # (different keys: lists that differ in their values alone share a template in
        # the compiled decoder, tests/tracer/test_native_lines.py)
        spans[0]["attributes"] = [{"key": f"n{i}", "value": {"intValue": str(i)}}]
        line = orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans[:1]}]}]})
        assert traces_from_otlp_line(line)["a" * 32][0].attributes == {f"n{i}": i}
        assert len(seen) <= _otlp_lines._SEEN_MAX
    assert len(seen) == 50  # cleared once full, then refilled
    prompt = "x" * _otlp_lines._SEEN_BYTES  # a long text (a prompt) is not kept
    spans[0]["attributes"] = [{"key": "gen_ai.prompt", "value": {"stringValue": prompt}}]
    line = orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans[:1]}]}]})
    assert traces_from_otlp_line(line)["a" * 32][0].attributes == {"gen_ai.prompt": prompt}
    assert len(seen) == 50 and max(map(len, seen)) <= _otlp_lines._SEEN_BYTES


@pytest.mark.parametrize(
    "attributes", [None, {}, [None], [{"key": 1}], [{"value": {"stringValue": "x"}}], "[]"]
)
def test_attribute_lists_of_the_wrong_shape_go_to_the_general_path(attributes):
    span = {
        "traceId": "a" * 32,
        "spanId": "1" * 16,
        "startTimeUnixNano": "1700000000000000001",
        "endTimeUnixNano": "1700000000000000009",
        "attributes": attributes,
    }
    line = orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})
    for _ in range(2):  # the second time from the memo, if it kept it
        assert traces_from_otlp_line(line) is None
