"""What requests cost in tokens, from the token usage the traces carry."""

from __future__ import annotations

from tracer import attributes as attrs
from tracer.analysis.aggregate import Analysis
from tracer.analysis.whatif.scenario import Scenario

__all__ = ["Prices", "cost_after", "cost_per_request"]

#: Price per 1,000 (input, output) tokens, by model; ``"*"`` prices every model.
Prices = dict[str, tuple[float, float]]


def cost_per_request(a: Analysis, prices: Prices) -> float | None:
    """Mean cost of a request: price per 1k tokens x tokens, over the priced models.

    A ``*`` entry prices every model. None when no request is priced.
    """
    if a.tokens is None or not prices:
        return None
    cols = a.columns
    strings = cols.strings
    total = 0.0
    priced = False
    for tin, tout, model in zip(
        cols.input_tokens.tolist(), cols.output_tokens.tolist(), cols.model.tolist(), strict=True
    ):
        if tin < 0:  # no usage on this trace
            continue
        price = prices.get(strings[model] or "") or prices.get("*")
        if price is None:
            continue
        priced = True
        total += tin / 1000 * price[0] + tout / 1000 * price[1]
    return total / a.tokens.requests if priced else None


def cost_after(before: float | None, scenario: Scenario) -> float | None:
    """The mean cost of a request after ``scenario``: the model's tokens (those of its
    ``inference`` calls) scale with the calls it makes, each as the run's calls were."""
    return None if before is None else before * scenario.calls(attrs.INFERENCE).n
