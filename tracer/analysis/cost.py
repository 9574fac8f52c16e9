"""What requests cost in tokens, from the token usage the traces carry."""

from __future__ import annotations

from tracer.analysis.aggregate import Analysis

__all__ = ["Prices", "cost_per_request"]

#: Price per 1,000 (input, output) tokens, by model; ``"*"`` prices every model.
Prices = dict[str, tuple[float, float]]


def cost_per_request(a: Analysis, prices: Prices) -> float | None:
    """Mean cost of a request: price per 1k tokens x tokens, over the priced models.

    A ``*`` entry prices every model. None when no request is priced.
    """
    if a.tokens is None or not prices:
        return None
    total = 0.0
    priced = False
    for b in a.breakdowns:
        if b.input_tokens is None:
            continue
        price = prices.get(b.model or "") or prices.get("*")
        if price is None:
            continue
        priced = True
        total += (b.input_tokens or 0) / 1000 * price[0] + (b.output_tokens or 0) / 1000 * price[1]
    return total / a.tokens.requests if priced else None
