"""The stage-map index gives the same rule as trying every rule in order."""

from __future__ import annotations

import tomllib
from importlib import resources

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracer import engines
from tracer.analysis.conventions.stage_map import StageMapRules, conventions, parse_stage_map
from tracer.spans.model import Span

_shipped = tomllib.loads(
    resources.files("tracer.analysis.conventions").joinpath("conventions.toml").read_text("utf-8")
)["rule"] + [dict(raw) for c in engines.REGISTRY for raw in c.rules]
_NAMES = sorted(
    {
        op
        for raw in _shipped
        for op in (
            [raw["operation"]]
            if isinstance(raw.get("operation"), str)
            else raw.get("operation", [])
        )
    }
    | {"a", "ab", "a[b", "x?", "*", "GET /x"}
)
_KEYS = sorted(
    {raw["attribute"] for raw in _shipped if "attribute" in raw}
    | {k for raw in _shipped for k in raw.get("attributes", {})}
    | {"k", "j"}
)
_patterns = st.sampled_from(_NAMES + ["a*", "a?", "a[b]", "[ab]", "a[", "*", "g*"])


def _linear(rules: StageMapRules, span: Span, in_engine: bool):
    return next((r for r in rules.rules if r.matches(span, in_engine)), None)


_user_rule = st.fixed_dictionaries(
    {"stage": st.sampled_from(["s1", "s2", "s3"])},
    optional={
        "operation": st.one_of(_patterns, st.lists(_patterns, min_size=1, max_size=3)),
        "service": st.one_of(st.sampled_from(["svc", "s*", "other"]), st.just(["svc", "x"])),
        "kind": st.sampled_from(["client", "server", "internal"]),
        "attribute": st.sampled_from(_KEYS),
        "attributes": st.dictionaries(
            st.sampled_from(_KEYS), st.sampled_from(["LLM", "1", "x"]), min_size=1, max_size=2
        ),
        "inside": st.just("engine_request"),
    },
)
_spans = st.builds(
    Span,
    st.just("a" * 32),
    st.just("b" * 16),
    st.none(),
    st.sampled_from(["svc", "sx", "other"]),
    st.sampled_from(_NAMES + ["b", "ax", "g", ""]),
    st.integers(0, 5),
    st.just(1),
    st.just(2),
    st.none(),
    st.just(0),
    st.none(),
    st.dictionaries(
        st.sampled_from(_KEYS + ["z"]), st.sampled_from(["LLM", "1", "x", 1]), max_size=4
    ),
)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_user_rule, min_size=1, max_size=6), _spans, st.booleans())
def test_index_matches_linear_scan_for_user_rules_and_conventions(raw_rules, span, in_engine):
    user = parse_stage_map({"rule": raw_rules}, "test")
    both = parse_stage_map({"rule": raw_rules + _shipped}, "test", roles=True)
    for rules in (user, conventions(), both):
        assert rules.match(span, in_engine) is _linear(rules, span, in_engine)
