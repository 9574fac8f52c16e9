"""The compiled decoder of OTLP JSON lines gives the typed decoder's spans, or steps aside.

``tracer/spans/_native.c`` reads a line first where it is built; for any line it must
give exactly what :func:`~tracer.spans._otlp_lines.typed_traces` gives (the same trace
ids in the same order, the same spans with values of the same types), or None. Here it
meets random lines, lists that share a template, values the template must leave to
Python, and hostile bytes: truncations, mutations, bad UTF-8, lone surrogates, deep
nesting. (``tests/tracer/test_otlp_lines.py`` compares both decoders with the general
path.)
"""

from __future__ import annotations

import json
import shutil
import sysconfig

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.tracer.test_otlp_lines import _lines
from tracer.spans import _otlp_lines
from tracer.spans._otlp_lines import typed_traces

native = _otlp_lines._native_decode


def _templates() -> int:
    from tracer.spans import _native

    return _native.templates()


def _compiler() -> bool:
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc) is not None


def test_the_compiled_decoder_is_built_where_a_compiler_is():
    if not _compiler():
        pytest.skip("no C compiler here: hoptrace installs without the compiled decoder")
    assert native is not None, (
        "tracer/spans/_native.c was not built (pip install -e . builds it) "
        "or HOPTRACE_NATIVE=off is set"
    )


needs_native = pytest.mark.skipif(native is None, reason="the compiled decoder is not built")


def _same(line: bytes) -> dict | None:
    """The compiled decoder's answer, checked against the typed decoder's."""
    got = native(line)
    if got is not None:
        want = typed_traces(line)
        assert want is not None, "the compiled decoder took a line the typed one refuses"
        assert list(got) == list(want)
        assert repr(got) == repr(want)  # values of the same types (1 vs 1.0), in order
    return got


def _span(i: int, attributes: list, **fields) -> dict:
    return {
        "traceId": f"{i // 3 + 1:032x}",
        "spanId": f"{i + 1:016x}",
        "parentSpanId": f"{i:016x}" if i % 3 else "",
        "name": "chat",
        "kind": 3,
        "startTimeUnixNano": str(1_750_000_000_000_000_000 + i),
        "endTimeUnixNano": str(1_750_000_000_000_000_900 + i),
        "attributes": attributes,
        **fields,
    }


def _line(spans: list[dict], service: str = "app") -> bytes:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}
    return json.dumps(
        {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}
    ).encode()


def _llm_attributes(i: int) -> list:
    return [
        {"key": "gen_ai.request.model", "value": {"stringValue": "sim-1"}},
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": str(100 + i)}},
        {"key": "gen_ai.usage.output_tokens", "value": {"intValue": 20 + i}},
        {"key": "gen_ai.latency.time_in_queue", "value": {"doubleValue": 0.001 * i + 0.5}},
        {"key": "gen_ai.response.id", "value": {"stringValue": f"chatcmpl-{i:05x}"}},
    ]


@needs_native
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_lines())
def test_random_lines_equal_the_typed_decoder_or_step_aside(line):
    _same(line)


@needs_native
def test_lists_that_differ_in_their_values_alone_share_a_template():
    before = _templates()
    spans = [_span(i, _llm_attributes(i)) for i in range(60)]
    got = _same(_line(spans))
    assert got is not None
    decoded = [s for trace in got.values() for s in trace]
    assert [s.attributes["gen_ai.usage.input_tokens"] for s in decoded] == [
        100 + i for i in range(60)
    ]
    assert [s.attributes["gen_ai.response.id"] for s in decoded][-1] == "chatcmpl-0003b"
    assert type(decoded[7].attributes["gen_ai.latency.time_in_queue"]) is float
    assert decoded[7].attributes["gen_ai.latency.time_in_queue"] == 0.001 * 7 + 0.5
    # one template for the sixty lists (made from the first), each span its own dict
    assert _templates() - before <= 1
    decoded[0].attributes["gen_ai.usage.input_tokens"] = -1
    assert decoded[1].attributes["gen_ai.usage.input_tokens"] == 101


@needs_native
def test_a_decided_on_value_stays_in_the_template_so_another_stage_is_another_template():
    _otlp_lines._compiled()  # configured afresh: no templates yet
    stages = ["inference", "auth", "7"]

    def staged(i: int) -> list:
        stage = {"key": "hoptrace.stage", "value": {"stringValue": stages[i % 3]}}
        return [*_llm_attributes(i)[:2], stage, *_llm_attributes(i)[2:]]

    got = _same(_line([_span(i, staged(i)) for i in range(30)]))
    assert got is not None
    decoded = [s for trace in got.values() for s in trace]
    assert [s.stage for s in decoded] == [stages[i % 3] for i in range(30)]
    assert [s.attributes["gen_ai.usage.input_tokens"] for s in decoded] == [
        100 + i for i in range(30)
    ]
    assert _templates() == 3  # one template a stage, its value in the text


@needs_native
@pytest.mark.parametrize(
    "attributes",
    [
        # a token count past NUMBER_BOUNDS: the typed decoder steps aside, so must this
        [{"key": "gen_ai.usage.input_tokens", "value": {"intValue": str(10**13)}}],
        [{"key": "gen_ai.usage.input_tokens", "value": {"doubleValue": 1e13}}],
        [{"key": "gen_ai.latency.time_in_queue", "value": {"doubleValue": 2e9}}],
        # the stage, decided on: never from a template
        [{"key": "hoptrace.stage", "value": {"intValue": "7"}}],
        [{"key": "hoptrace.stage", "value": {"stringValue": "auth"}}],
        # a key twice: the last one wins
        [
            {"key": "n", "value": {"intValue": "1"}},
            {"key": "n", "value": {"stringValue": "one"}},
        ],
        # numbers the typed decoder always checks (durations, event times)
        [{"key": "tgi.queue_time", "value": {"stringValue": "3.9ms"}}],
        [{"key": "hoptrace.event_ns.QUEUE_START", "value": {"intValue": "5"}}],
        # a token count given as text, and odd numbers
        [{"key": "gen_ai.usage.output_tokens", "value": {"stringValue": "12"}}],
        [{"key": "x", "value": {"intValue": "007"}}],
        [{"key": "x", "value": {"intValue": "-12"}}],
        [{"key": "x", "value": {"doubleValue": 5}}],
        [{"key": "x", "value": {"doubleValue": 1e308}}],
        [{"key": "x", "value": {"doubleValue": -0.0}}],
        [{"key": "x", "value": {"intValue": str(2**63 - 1)}}],
        [{"key": "x", "value": {"stringValue": "é\u2028"}}],
    ],
)
def test_what_a_template_cannot_decide_is_decoded_as_the_typed_decoder_does(attributes):
    # The first span makes the template; the others, with other values, use it.
    def varied(i: int) -> list:
        text = json.dumps(attributes).replace("7", str(7 + i)).replace("12", str(12 + i))
        return json.loads(text)

    line = _line([_span(i, varied(i)) for i in range(6)])
    for _ in range(2):  # the second time, everything is remembered
        got, want = _same(line), typed_traces(line)
        # what the typed decoder takes, this takes too (by Python's decoding, if need be)
        assert (got is None) == (want is None)


@needs_native
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_bytes_equal_the_typed_decoder_or_step_aside(data):
    spans = [_span(i, _llm_attributes(i), events=[]) for i in range(4)]
    spans[1]["events"] = [
        {"name": "hoptrace.first_token", "timeUnixNano": spans[1]["endTimeUnixNano"]}
    ]
    spans[2]["status"] = {"code": 2, "message": "x"}
    line = bytearray(_line(spans))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(line) - 1))
        how = data.draw(st.sampled_from(["set", "delete", "insert"]))
        byte = data.draw(
            st.sampled_from(list(b'"\\{}[]:,0a-.eE\x00\x1f\x7f\x80\xc3\xa9\xed\xa0\xf4\x90 \n'))
        )
        if how == "set":
            line[at] = byte
        elif how == "delete":
            del line[at]
        else:
            line.insert(at, byte)
    _same(bytes(line))


@needs_native
@pytest.mark.parametrize(
    "special",
    [
        b'\\"',
        b"\\\\",
        b"\\u00e9",
        b"\\ud83d\\ude00",
        b"\x01",
        b"\x7f",
        "\u00e9".encode(),
        "\U0001f600".encode(),
        b"\xc3",
        b"\xed\xa0\x80",
        b"\xff",
    ],
)
def test_a_string_is_read_the_same_wherever_a_special_byte_sits_in_it(special):
    # Strings are scanned eight bytes at a time: put the byte at every place in a word,
    # in a span's name (read) and in an attribute's value (kept as text).
    template = _line([_span(0, [{"key": "k", "value": {"stringValue": "VALUE"}}])])
    for before in range(0, 18):
        for after in (0, 1, 7, 8, 9):
            text = b"a" * before + special + b"b" * after
            for field in (b'"name": "chat"', b'"stringValue": "VALUE"'):
                name, _, _ = field.partition(b": ")
                line = template.replace(field, name + b': "' + text + b'"')
                got = _same(line)  # what it takes, it reads as the typed decoder does
                # and what it may take, it takes: plain text, wherever it sits
                if b"\\" not in special and typed_traces(line) is not None:
                    assert got is not None, (special, before, after, field)


@needs_native
def test_hostile_lines_step_aside():
    good = _line([_span(i, _llm_attributes(i)) for i in range(3)])
    assert _same(good) is not None
    for end in range(len(good) - 1):  # every truncation, as a cut file leaves
        cut = good[:end]
        assert native(cut) is None, cut[-40:]
    surrogate = good.replace(b'"chat"', b'"c\\ud800"', 1)  # a lone surrogate, escaped
    low = good.replace(b'"sim-1"', b'"s\\udc00"', 1)
    pair = good.replace(b'"sim-1"', b'"s\\ud83d\\ude00"', 1)  # a pair: valid JSON
    bad_utf8 = good.replace(b'"sim-1"', b'"s\xed\xa0\x80"', 1)  # a surrogate in UTF-8
    overlong = good.replace(b'"sim-1"', b'"s\xc0\xaf"', 1)
    deep = good.replace(b'"kind":', b'"deep": ' + b"[" * 200 + b"]" * 200 + b', "kind":', 1)
    assert deep != good
    for line in (surrogate, low, bad_utf8, overlong, deep):
        assert native(line) is None
    assert _same(pair) is not None
    for line in (surrogate, low, bad_utf8, overlong, deep, pair):
        try:
            orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        _same(line)


@needs_native
def test_what_it_leaves_to_the_typed_decoder():
    span = _span(0, [])
    after = json.dumps(
        {
            "resourceSpans": [
                {
                    "scopeSpans": [{"spans": [span]}],
                    "resource": {
                        "attributes": [{"key": "service.name", "value": {"stringValue": "a"}}]
                    },
                }
            ]
        }
    ).encode()
    older = json.dumps(
        {"resourceSpans": [{"instrumentationLibrarySpans": [{"spans": [span]}]}]}
    ).encode()
    named = _line([_span(0, [], name="caf\\u00e9")]).replace(b"\\\\u", b"\\u")
    kind = _line([_span(0, [], kind="SPAN_KIND_CLIENT")])
    state = _line([_span(0, [], traceState="ot=th:8")])
    for line, taken in ((after, False), (older, False), (named, False), (kind, False)):
        assert (native(line) is not None) == taken
        assert typed_traces(line) is not None  # the typed decoder reads each of them
    ((s,),) = _same(state).values()
    assert s.trace_state == "ot=th:8"
    assert typed_traces(after)["0" * 31 + "1"][0].service == "a"


@needs_native
def test_the_lines_it_is_meant_for_are_taken_not_stepped_aside():
    # What exporters write for the chain and for LLM calls (token counts, engine
    # latencies, first-token marks, an error status), and plain odd values: a decoder that
    # stepped aside on them would pass every "equal or step aside" check.
    from tests.synthetic import mixed_traces, to_otlp_json
    from tests.tracer.test_otlp_lines import _LAX_LINES

    lines = [json.dumps(to_otlp_json(trace)).encode() for trace in mixed_traces(40)]
    lines.append(_line([_span(i, _llm_attributes(i)) for i in range(30)]))
    for line in lines + list(_LAX_LINES):
        assert native(line) is not None, line[:200]
        _same(line)
