"""Hostile lines that once crashed or misled the compiled decoder: each class of defect
found by fuzzing, kept as a test of the ordinary suite.

The classes (docs/security.md): an attribute object with a member twice (the slot kept
one member's bounds and the other's kind, and a double's text was copied into a fixed
buffer); two attribute lists whose templates were the same text with different slot
counts (values read past the template's tuples); a Python exception from a callback on
a line that was not read whole yet (a truncated last line); and two Python bugs every
path had (a kvlist key that is an object, a token count written ``--1``). Each line
here must give what the typed decoder gives, or step aside, and nothing may raise.
"""

from __future__ import annotations

import json

import pytest

from tracer.analysis.loaders.files import LINE_BAD, LINE_GOOD, add_line
from tracer.analysis.model.traceset import TraceSet
from tracer.spans import Warnings, _otlp_lines
from tracer.spans._numbers import attribute_problem
from tracer.spans._otlp_lines import traces_from_otlp_line, typed_traces
from tracer.spans.otlp import spans_from_otlp_json

native = _otlp_lines._native_decode
needs_native = pytest.mark.skipif(native is None, reason="the compiled decoder is not built")

_TRACE = "0af7651916cd43dd8448eb211c80319c"


def _line(attribute_texts: list[str]) -> bytes:
    """One span per attribute list, each list given as its JSON text (so that a member
    may be written twice, which json.dumps cannot)."""
    spans = ",".join(
        f'{{"traceId":"{_TRACE}","spanId":"{i + 1:x}{"1" * 15}","name":"chat",'
        f'"startTimeUnixNano":"1700000000000000001","endTimeUnixNano":"1700000000000000002",'
        f'"attributes":{text}}}'
        for i, text in enumerate(attribute_texts)
    )
    return f'{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{spans}]}}]}}]}}'.encode()


def _attributes(line: bytes, decode) -> list[dict]:
    got = decode(line)
    assert got is not None
    return [s.attributes for trace in got.values() for s in trace]


def _fresh_templates() -> None:
    _otlp_lines._compiled()  # configured afresh: no templates, an empty memo
    _otlp_lines._SEEN_ATTRIBUTES.clear()


@needs_native
@pytest.mark.parametrize(
    ("firsts", "second", "want"),
    [
        # The second value has a member the template does not read ("x"), so it was
        # refused after its kind was written: the string's bounds, the double's kind,
        # and then a copy of 200 bytes into 48.
        (('"a"', '"' + "9" * 200 + '"'), '{"doubleValue":1.5,"x":0}', 1.5),
        (('"a"', '"2.5"'), '{"doubleValue":1.5,"x":0}', 1.5),
        (("2.5", "3.5"), '{"doubleValue":1.5}', 1.5),
        (('"1"', '"5"'), '{"intValue":"7","x":0}', 7),
        (('"1"', '"5"'), '{"intValue":"7"}', 7),
    ],
)
def test_an_attribute_with_its_value_twice_reads_as_the_typed_decoder_reads_it(
    firsts, second, want
):
    _fresh_templates()
    field = "doubleValue" if firsts[0][0] != '"' else "stringValue"
    field = "intValue" if firsts[0] == '"1"' else field
    # lists that differ in the first value alone: one template, and its second use
    line = _line([f'[{{"key":"k","value":{{"{field}":{v}}},"value":{second}}}]' for v in firsts])
    compiled = _attributes(line, native)
    assert compiled == _attributes(line, typed_traces)
    assert [a["k"] for a in compiled] == [want, want]


@needs_native
def test_an_attribute_with_its_key_twice_reads_as_the_typed_decoder_reads_it():
    _fresh_templates()
    twice = '[{"key":"a","key":"b","value":{"intValue":"3"}}]'
    line = _line([twice, twice.replace('"3"', '"4"'), '[{"key":"b","value":{"intValue":"5"}}]'])
    assert (
        _attributes(line, native)
        == _attributes(line, typed_traces)
        == [
            {"b": 3},
            {"b": 4},
            {"b": 5},
        ]
    )


@needs_native
def test_a_value_taken_out_of_a_template_does_not_match_a_literal_left_in():
    # {"intValue":"5"} without its digits is the text of {"intValue":""}: two lists that
    # were one template with two slots and with one.
    _fresh_templates()
    slots = '[{"key":"a","value":{"intValue":"5"}},{"key":"b","value":{"stringValue":"s"}}]'
    literal = '[{"key":"a","value":{"intValue":""}},{"key":"b","value":{"stringValue":"t"}}]'
    for order in ([slots, literal, literal], [literal, slots, slots]):
        _fresh_templates()
        line = _line(order)
        compiled = _attributes(line, native)
        assert compiled == _attributes(line, typed_traces)
        assert {"a": "", "b": "t"} in compiled and {"a": 5, "b": "s"} in compiled


@needs_native
def test_slots_of_another_kind_are_another_template():
    _fresh_templates()
    kinds = [
        '[{"key":"a","value":{"intValue":"12"}}]',
        '[{"key":"a","value":{"doubleValue":1.25}}]',
        '[{"key":"a","value":{"stringValue":"12"}}]',
        '[{"key":"a","value":{"intValue":12}}]',
    ]
    line = _line(kinds + kinds[::-1])
    compiled = _attributes(line, native)
    assert compiled == _attributes(line, typed_traces)
    assert [type(a["a"]) for a in compiled[:4]] == [int, float, str, int]


_ENDS = [
    # what a collector killed mid-write leaves: the last line cut inside a span after a
    # value that a Python callback cannot read
    '[{"key":"x","value":{"kvlistValue":{"values":[{"key":{},"value":{}}]}}}]',
    '[{"key":"gen_ai.usage.input_tokens","value":{"stringValue":"--1"}}]',
    '[{"key":"gen_ai.usage.input_tokens","value":{"stringValue":"1e999"}}]',
]


@pytest.mark.parametrize("attributes", _ENDS)
def test_a_cut_line_after_a_value_python_refuses_is_a_bad_line_not_an_exception(attributes):
    whole = _line([attributes])
    for end in range(whole.index(b'"attributes"'), len(whole)):
        cut = whole[:end]
        assert traces_from_otlp_line(cut) is None
        if native is not None:
            assert native(cut) is None
        assert add_line(cut, TraceSet(), "cut.jsonl") == LINE_BAD


@pytest.mark.parametrize("attributes", _ENDS)
def test_a_whole_line_with_a_value_python_refuses_is_read_on_every_path(attributes):
    line = _line([attributes])
    traces = TraceSet()
    assert add_line(line, traces, "whole.jsonl") == LINE_GOOD
    assert [s.span_id for spans in traces.traces.values() for s in spans] == ["1" * 16]
    general = list(spans_from_otlp_json(json.loads(line), Warnings()))
    assert [s.span_id for s in general] == ["1" * 16]
    if native is not None:
        got = native(line)
        assert got is None or repr(got) == repr(typed_traces(line))


def test_a_kvlist_key_that_is_not_text_is_no_key():
    line = _line(
        [
            '[{"key":"x","value":{"kvlistValue":{"values":['
            '{"key":{},"value":{"intValue":"1"}},{"key":[1],"value":{}},'
            '{"key":"ok","value":{"intValue":"2"}}]}}}]'
        ]
    )
    want = [{"x": {None: None, "ok": 2}}]  # the last of the keys that are not text
    assert _attributes(line, typed_traces) == want
    general = spans_from_otlp_json(json.loads(line), Warnings())
    assert [s.attributes for s in general] == want


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("--1", False),  # not an integer int() reads: text, ignored
        ("+-1", False),
        ("²", False),  # a digit to isdigit(), not to int()
        ("12", False),
        (" -12 ", False),
        ("1" * 13, True),  # past 10**12
        ("1" * 21, True),
        ("1" * 5000, True),  # past int()'s digit limit: still out of range, no error
        ("x" * 5000, False),
    ],
)
def test_a_token_count_written_as_text_is_checked_without_an_exception(text, problem):
    got = attribute_problem("gen_ai.usage.input_tokens", text)
    assert (got is not None) == problem


@pytest.mark.skipif(native is None, reason="the compiled parts are not built")
def test_words_refuses_what_is_not_a_span_before_it_reads_a_field():
    from tracer.analysis.attribution import words

    compiled = words._compiled_words
    if compiled is None:
        pytest.skip("the compiled window is not built")
    assert compiled([object()]) is NotImplemented
    assert compiled([1, 2, 3]) is NotImplemented


@pytest.fixture
def reconfigure(monkeypatch):
    """Configure the compiled decoder with other callbacks; afterwards, as it was."""

    def with_callbacks(**callbacks) -> None:
        for name, callback in callbacks.items():
            monkeypatch.setattr(_otlp_lines, name, callback)
        _otlp_lines._SEEN_ATTRIBUTES.clear()  # so that each text meets the callbacks
        _otlp_lines._SERVICES.clear()
        _otlp_lines._compiled()

    yield with_callbacks
    monkeypatch.undo()
    _otlp_lines._compiled()


@needs_native
@pytest.mark.parametrize("callback", ["_remember", "_service_of", "first_token_ns"])
def test_an_exception_from_python_called_span_by_span_is_a_step_aside(reconfigure, callback):
    def broken(*args):
        raise ValueError("a callback that cannot read what it was given")

    resource = '{"attributes":[{"key":"service.name","value":{"stringValue":"app"}}]}'
    marked = '[{"key":"gen_ai.latency.time_to_first_token","value":{"doubleValue":0.5}}]'
    line = _line([marked]).replace(
        b'{"scopeSpans"', b'{"resource":' + resource.encode() + b',"scopeSpans"'
    )
    assert native(line) is not None  # taken, with every callback called
    reconfigure(**{callback: broken})
    assert native(line) is None

    def interrupted(*args):
        raise KeyboardInterrupt

    reconfigure(**{callback: interrupted})
    with pytest.raises(KeyboardInterrupt):  # not an Exception: it goes up
        native(line)
