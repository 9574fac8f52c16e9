"""The compiled shape words and split holders equal the Python references, on every kind
of trace.

``words`` (``tracer/analysis/attribution/_native.c``) must give what
:func:`~tracer.analysis.attribution.words.shape_words` gives for any list of spans, and
``earliest`` what :func:`~tracer.analysis.attribution.words.earliest_holder` gives, or
NotImplemented (then the reference is used). The spans here vary every field: ids that
repeat, parents that are missing, None or their own span, key fields of every type,
attribute dicts in any order, times past int64, marks or none, a trace state.
"""

from __future__ import annotations

import shutil
import struct
import sysconfig

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracer.analysis.attribution import words as words_module
from tracer.analysis.attribution.attribute import split_value
from tracer.analysis.attribution.words import earliest_holder, shape_words
from tracer.spans.model import Span

compiled = words_module._compiled_words
compiled_earliest = words_module._compiled_earliest


def test_the_compiled_words_are_built_where_a_compiler_is():
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        pytest.skip("no C compiler here: hoptrace installs without the compiled words")
    assert compiled is not None, (
        "tracer/analysis/attribution/_native.c was not built (pip install -e . builds it) "
        "or HOPTRACE_NATIVE=off is set"
    )


needs_compiled = pytest.mark.skipif(compiled is None, reason="the compiled words are not built")

_ids = st.sampled_from(["a1", "b2", "c3", "d4", "e5"])
_time = st.one_of(
    st.integers(1, 10**18), st.integers(2**63 - 3, 2**63 + 3), st.integers(-(2**64), -1)
)


@st.composite
def _span(draw) -> Span:
    return Span(
        trace_id="t",
        span_id=draw(_ids),
        parent_id=draw(st.one_of(st.none(), _ids, st.just("zz"))),
        service=draw(st.sampled_from(["app", "model", ""])),
        name=draw(st.sampled_from(["chat", "POST /v1", "é"])),
        kind=draw(st.integers(0, 5)),
        start_ns=draw(_time),
        end_ns=draw(_time),
        stage=draw(st.one_of(st.none(), st.sampled_from(["auth", "inference"]))),
        status=draw(st.integers(0, 2)),
        first_token_ns=draw(st.one_of(st.none(), _time)),
        attributes=draw(
            st.dictionaries(
                st.sampled_from(["gen_ai.usage.input_tokens", "k", "hoptrace.stage", "x"]),
                st.one_of(st.integers(), st.text(max_size=2), st.none()),
                max_size=4,
            )
        ),
        trace_state=draw(st.one_of(st.none(), st.just(""), st.just("ot=th:8"))),
    )


@needs_compiled
@settings(max_examples=1500, deadline=None)
@given(st.lists(_span(), min_size=1, max_size=8))
def test_compiled_words_equal_the_reference(spans):
    got = compiled(spans)
    want = shape_words(spans)
    assert got is not NotImplemented
    assert got == want
    if got is not None:
        key, times, has, weighted = got
        assert [type(x) for x in key[0]] == [int] * len(spans)
        assert type(weighted) is bool


@needs_compiled
def test_what_the_compiled_words_do_not_read_goes_to_the_reference():
    plain = Span("t", "a", None, "app", "chat", 2, 1, 2)

    class Other(Span):
        pass

    odd = [
        [],  # nothing
        [plain] * 513,  # more spans than the batches take
        [Other("t", "a", None, "app", "chat", 2, 1, 2)],  # another type
        [Span("t", "a", None, "app", "chat", 2, 1.0, 2)],  # a float time
        [Span("t", "a", 7, "app", "chat", 2, 1, 2)],  # a parent id that is not a string
        [Span("t", "a", None, "app", "chat", 2, 1, 2, attributes=_Dict(x=1))],
    ]
    for spans in odd:
        assert compiled(spans) is NotImplemented
        assert words_module.words(spans) == shape_words(spans)
    assert compiled((plain,)) is NotImplemented  # a tuple, not a list


class _Dict(dict):
    pass


_KEYS = st.sampled_from(["gen_ai.usage.input_tokens", "k", "hoptrace.stage", "x"])


@needs_compiled
@settings(max_examples=500, deadline=None)
@given(st.lists(_span(), min_size=0, max_size=8), _KEYS)
def test_the_compiled_split_holder_is_the_reference_span(spans, key):
    got = compiled_earliest(spans, key)
    if any(type(s.start_ns) is int and not -(2**63) <= s.start_ns < 2**63 for s in spans):
        assert got is NotImplemented or got is earliest_holder(spans, key)
        return
    assert got is earliest_holder(spans, key)  # the same span, not an equal one


@pytest.mark.parametrize("which", ["reference", "compiled"])
def test_the_first_of_equal_starts_holds_the_split_value(which):
    holder = earliest_holder if which == "reference" else compiled_earliest
    if holder is None:
        pytest.skip("the compiled words are not built")
    spans = [
        Span("t", "a", None, "app", "chat", 2, 5, 9, attributes={"hoptrace.run": "late"}),
        Span("t", "b", "a", "app", "chat", 2, 3, 9, attributes={"hoptrace.run": "first"}),
        Span("t", "c", "a", "app", "chat", 2, 3, 9, attributes={"hoptrace.run": "second"}),
        Span("t", "d", "a", "app", "chat", 2, 1, 9),
    ]
    assert holder(spans, "hoptrace.run") is spans[1]
    assert split_value(spans, "hoptrace.run") == "first"
    assert split_value(spans, "absent") == "(none)"
    assert holder(spans, "absent") is None


def test_the_reference_words_read_the_tree_the_times_and_the_marks():
    spans = [
        Span("t", "a", None, "app", "chat", 2, 1, 9, first_token_ns=4),
        Span("t", "b", "a", "app", "auth", 3, 2, 5, attributes={"k": 1, "hoptrace.stage": "x"}),
        Span("t", "c", "gone", "db", "get", 3, 6, 8),
    ]
    key, times, has, weighted = shape_words(spans)
    assert key[0] == (-1, 0, -1)  # parents by position; a missing one is -1
    assert key[2] == ((), ("k", "hoptrace.stage"), ())
    assert times is not None
    assert struct.unpack("9q", times) == (1, 2, 6, 9, 5, 8, 4, 0, 0)
    assert has == b"\x01\x00\x00"
    assert weighted is False
    assert shape_words([*spans, spans[0]]) is None  # a span id twice
    late = Span("t", "d", "a", "app", "x", 3, 2**63, 2**63 + 1)
    assert shape_words([*spans, late])[1] is None  # past int64: no words


@needs_compiled
def test_what_the_compiled_holder_does_not_read_goes_to_the_reference():
    plain = Span("t", "a", None, "app", "chat", 2, 1, 2, attributes={"k": 1})
    odd = [
        ([plain], 7),  # a key that is not a string
        ((plain,), "k"),  # a tuple, not a list
        ([Span("t", "a", None, "app", "chat", 2, 1.0, 2, attributes={"k": 1})], "k"),
        ([Span("t", "a", None, "app", "chat", 2, 2**64, 2, attributes={"k": 1})], "k"),
        ([Span("t", "a", None, "app", "chat", 2, 1, 2, attributes=_Dict(k=1))], "k"),
    ]
    for spans, key in odd:
        assert compiled_earliest(spans, key) is NotImplemented
        assert words_module.earliest(list(spans), key) is earliest_holder(list(spans), key)
    with pytest.raises(TypeError):
        compiled_earliest([plain])
