"""What a what-if with more calls of a stage adds to its text and page (its JSON:
``json_out.calls_dict``): the
change, the cost of a request before and after, and the most calls that fit an SLO
(``docs/whatif.md``, more calls)."""

from __future__ import annotations

from tracer.analysis.whatif.afford import Afford
from tracer.analysis.whatif.retime import WhatIf

__all__ = ["calls_headline", "calls_notes", "whatif_title"]


def whatif_title(w: WhatIf) -> str:
    """The what-if's title: the stage faster, or the whole change when it adds calls."""
    if w.calls:
        return f"What if: {w.change} ({w.traces} traces)"
    return f"What if {w.stage} were {w.speedup:g}x faster ({w.traces} traces)"


def calls_headline(w: WhatIf) -> str:
    """The sentence a manager reads, for a change that adds calls."""
    p50 = w.after.p50 - w.before.p50
    p90 = w.after.p90 - w.before.p90
    return (
        f"{w.change} -> end-to-end {w.before.p50:,.0f} -> {w.after.p50:,.0f} ms at P50 "
        f"({p50:+,.0f} ms), {w.before.p90:,.0f} -> {w.after.p90:,.0f} ms at P90 ({p90:+,.0f} ms)."
    )


def calls_notes(w: WhatIf) -> list[str]:
    """The lines a change with calls adds under the what-if's table."""
    out = []
    if w.cost_per_request is not None:
        before, after = w.cost_per_request
        out.append(
            f"cost per request: {before:.4g} -> {after:.4g} (the model's tokens are paid "
            "for each of its calls)"
        )
    afford = w.afford
    if isinstance(afford, Afford):
        out.append(afford.describe())
        out.append(
            f"calls searched ({afford.model} model): "
            + ", ".join(f"{n} ({share * 100:.0f}% meet it)" for n, share in afford.tried)
        )
    return out
