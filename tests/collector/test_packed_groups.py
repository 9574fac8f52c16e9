"""A stored group of spans changed by hand never makes a read raise: whatever its body
holds, the spans that come back are usable ones of its trace (hypothesis)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector._rows import group_rows, span_row, spans_of_group
from tracer.spans._numbers import NUMERIC_KEYS, TIME_LIMIT_NS, attribute_problem
from tracer.spans.model import Span, Warnings

T0 = 1_700_000_000_000_000_000
TRACE = "ab" * 16
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from([0, -1, 2**62, T0 - 1, T0 + 10**9]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(["", "1e400", "-1", "ot=th:8"]),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=12), inner, max_size=3)
    ),
    max_leaves=8,
)


def _body() -> list:
    spans = [
        Span(TRACE, f"{i + 1:016x}", None if i == 0 else f"{1:016x}", "svc", f"op{i}", 2,
             T0 + i, T0 + 10 + i, "stage", 1, None, {"gen_ai.usage.input_tokens": 5, "k": "v"})
        for i in range(3)
    ]  # fmt: skip
    ((_, _, _, _, count, body),) = group_rows([span_row(s) for s in spans])
    assert count == 3
    return json.loads(body)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    where=st.one_of(
        st.tuples(st.just("body")),
        st.tuples(st.just("span"), st.integers(0, 2)),
        st.tuples(st.just("field"), st.integers(0, 2), st.integers(0, 12)),
        st.tuples(st.just("number"), st.integers(0, 2), st.sampled_from(sorted(NUMERIC_KEYS))),
    ),
    value=_VALUES,
)
def test_a_group_changed_anywhere_reads_as_usable_spans_of_its_trace(where, value):
    body = _body()
    if where[0] == "body":
        body = value
    elif where[0] == "span":
        body[where[1]] = value
    elif where[0] == "field":
        body[where[1]][where[2]] = value
    else:
        body[where[1]][11][where[2]] = value
    tally = Warnings()
    spans = spans_of_group(TRACE, json.dumps(body).encode(), 3, tally)
    # Every span of the group is read or counted as skipped, once; a body that is not a
    # list of them counts as its 3 spans.
    if isinstance(body, list):
        assert len(spans) + tally.skipped_spans == len(body)
    else:
        assert spans == [] and tally.skipped_spans == 3
    for s in spans:
        assert isinstance(s, Span) and s.trace_id == TRACE and s.span_id
        assert 0 <= s.start_ns <= s.end_ns < TIME_LIMIT_NS
        assert s.first_token_ns is None or 0 <= s.first_token_ns < TIME_LIMIT_NS
        assert isinstance(s.attributes, dict) and s.trace_state != ""
        assert all(
            attribute_problem(k, s.attributes[k]) is None for k in NUMERIC_KEYS & set(s.attributes)
        )


@given(st.binary(max_size=200))
def test_a_body_of_any_bytes_reads_as_its_2_spans_skipped(body):
    tally = Warnings()
    assert spans_of_group(TRACE, body, 2, tally) == []
    assert tally.skipped_spans == 2 or body.strip(b" \t\n\r").startswith(b"[")
