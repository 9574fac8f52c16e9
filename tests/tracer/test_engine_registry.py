"""The registry of serving engines and naming schemes is where every key comes from: a
key an engine's phases or the token counts read is range-checked where spans come in,
and the token counts try the keys in the registry's order."""

from __future__ import annotations

from tracer import attributes as attrs
from tracer import engines
from tracer.analysis.conventions.phases import COORDINATOR_KEYS, PHASE_KEYS
from tracer.analysis.model.breakdown import count_tokens
from tracer.spans._numbers import NUMBER_BOUNDS, NUMERIC_KEYS, checked, span_number_problem
from tracer.spans.model import Span, Warnings

T0 = 1_700_000_000 * 10**9


def _span(attributes: dict) -> Span:
    return Span("a" * 32, "1" * 16, None, "proxy", "request", 2, T0, T0 + 9_000_000,
                attributes=attributes)  # fmt: skip


def test_every_key_the_registry_lists_is_checked_at_ingest():
    for c in engines.REGISTRY:
        numeric = c.seconds + c.milliseconds + c.durations + c.input_tokens
        numeric += c.output_tokens + c.cached_tokens + tuple(map(engines.event_key, c.events))
        assert set(numeric) <= NUMERIC_KEYS, c.name
        assert set(c.phases) | set(c.coordinator) <= NUMERIC_KEYS, c.name
    assert PHASE_KEYS | COORDINATOR_KEYS <= NUMERIC_KEYS
    assert NUMBER_BOUNDS[attrs.LLMD_PREFILL_MS] == 1e12 and NUMBER_BOUNDS[attrs.LLMD_TRUE_TTFT_MS]
    assert [c.name for c in engines.REGISTRY] == [
        "genai",
        "openinference",
        "vllm",
        "tgi",
        "triton",
        "llm-d",
    ]


def test_an_llmd_time_out_of_range_is_refused_at_the_collector_and_dropped_by_the_loaders():
    bad = _span({attrs.LLMD_PREFILL_MS: 1e300, attrs.LLMD_DECODE_MS: 4.5})
    assert span_number_problem(bad) == (
        "llm_d.pd_proxy.prefill_duration_ms is not a finite number of milliseconds up to 1e+12",
        1e300,
    )
    warnings = Warnings()
    kept = checked(bad, warnings)
    assert kept is not None and kept.attributes == {attrs.LLMD_DECODE_MS: 4.5}
    assert warnings.dropped_values == 1
    assert span_number_problem(_span({attrs.LLMD_TRUE_TTFT_MS: 1e12})) is None


def test_token_counts_take_the_first_key_in_the_registry_order():
    carrier = {
        attrs.OPENINFERENCE_PROMPT_TOKENS: 5,
        attrs.GEN_AI_PROMPT_TOKENS: 7,
        attrs.OPENINFERENCE_COMPLETION_TOKENS: 3,
        attrs.OPENINFERENCE_CACHE_READ_TOKENS: 2,
        attrs.GEN_AI_CACHED_TOKENS: 4,
        attrs.OPENINFERENCE_MODEL_NAME: "m-oi",
        attrs.GEN_AI_RESPONSE_MODEL: "m-genai",
    }
    assert count_tokens([carrier]) == (7, 3, "m-genai", 4)
