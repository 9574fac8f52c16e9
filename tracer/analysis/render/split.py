"""``--split-by``: the per-value results side by side (text, Markdown, JSON)."""

from __future__ import annotations

from typing import Any

from tracer.analysis.aggregate import Analysis
from tracer.analysis.checks.budget import BudgetResult
from tracer.analysis.model.substages import nested
from tracer.analysis.render.budget import budget_dict, budget_text
from tracer.analysis.render.json_out import analysis_dict, whatif_dict
from tracer.analysis.render.sections import (
    Section,
    analysis_sections,
    fmt_ms,
    fmt_ms_in,
    fmt_pct,
    fmt_pct_in,
    fmt_ratio,
    group_label,
    parents_of,
    whatif_sections,
)
from tracer.analysis.split import Split
from tracer.analysis.whatif.retime import WhatIf

__all__ = [
    "split_analysis_dict",
    "split_analysis_sections",
    "split_budget_dict",
    "split_budget_text",
    "split_summary",
    "split_whatif_dict",
    "split_whatif_sections",
]


def _headers(split: Split[Any]) -> list[str]:
    return [""] + [f"{value} ({n})" for value, n, _ in split.parts]


def split_summary(split: Split[Analysis]) -> Section:
    """One column per value: traces, end-to-end and TTFT percentiles, each group's share."""
    head = Section(f"By {split.attribute}: {len(split.parts)} values", _headers(split))
    results = [a for _, _, a in split.parts]
    for key in ("p50", "p90"):
        head.rows.append(
            [f"end-to-end {key.upper()} ms"]
            + [fmt_ms_in(getattr(a.e2e, key), a.e2e.intervals, key) for a in results]
        )
    if any(a.ttft is not None for a in results):
        head.rows.append(
            ["TTFT P50 ms"]
            + [fmt_ms_in(a.ttft.p50, a.ttft.intervals, "p50") if a.ttft else "-" for a in results]
        )
    by_stage = all(a.group_by == "stage" for a in results)
    order: dict[str, float] = {}
    for a in results:
        for g in a.groups:
            order[g.name] = order.get(g.name, 0.0) + g.share
    names = sorted(order, key=lambda n: (-order[n], n))
    if by_stage:
        names = nested(names, lambda n: n)
    found = [{g.name: g for g in a.groups} for a in results]
    parents = parents_of(names)
    for name in names:
        head.rows.append(
            [group_label(name, by_stage, parents)]
            + [
                fmt_pct_in(g.share, g.intervals, "share") if g is not None else fmt_pct(0.0)
                for g in (f.get(name) for f in found)
            ]
        )
    head.notes.append(
        f"traces without {split.attribute} are counted as (none); shares are of each "
        "value's own critical path"
    )
    return head


def split_analysis_sections(split: Split[Analysis], **options: Any) -> list[Section]:
    """The side-by-side summary, then each value's full sections."""
    out = [split_summary(split)]
    for value, n, a in split.parts:
        out += analysis_sections(a, title=f"{split.attribute} = {value}: {n} traces", **options)
    return out


def split_analysis_dict(split: Split[Analysis], **options: Any) -> dict[str, Any]:
    """``analyze --split-by --format json``."""
    return {
        "split_by": split.attribute,
        "splits": [
            {"value": value, "traces": n, "analysis": analysis_dict(a, **options)}
            for value, n, a in split.parts
        ],
    }


def split_whatif_sections(split: Split[WhatIf | str]) -> list[Section]:
    """Before, after and the realized speedups per value, then each value's projection.

    A part whose result is a string could not be projected (the text says why).
    """
    head = Section(f"What-if by {split.attribute}", _headers(split))
    parts = [w for _, _, w in split.parts]

    def row(label: str, cell: Any) -> None:
        head.rows.append([label] + [cell(w) if isinstance(w, WhatIf) else "-" for w in parts])

    row("P50 before ms", lambda w: fmt_ms(w.before.p50))
    row("P50 after ms", lambda w: fmt_ms(w.after.p50))
    row("speedup at P50", lambda w: fmt_ratio(w.realized["p50"]))
    row("speedup at P90", lambda w: fmt_ratio(w.realized["p90"]))
    row(
        "first token sooner at P50",
        lambda w: "-" if w.ttft_realized_p50 is None else fmt_ratio(w.ttft_realized_p50),
    )
    out = [head]
    for value, _, w in split.parts:
        if isinstance(w, WhatIf):
            first = whatif_sections(w)[0]
            first.title = f"{split.attribute} = {value}: {first.title}"
            out.append(first)
        else:
            head.notes.append(f"{value}: {w}")
    return out


def split_whatif_dict(split: Split[WhatIf | str]) -> dict[str, Any]:
    """``whatif --split-by --format json``; a part that could not be projected has an
    ``error`` instead of ``whatif``."""
    return {
        "split_by": split.attribute,
        "splits": [
            {"value": value, "traces": n}
            | ({"whatif": whatif_dict(w)} if isinstance(w, WhatIf) else {"error": w})
            for value, n, w in split.parts
        ],
    }


def split_budget_text(split: Split[BudgetResult]) -> str:
    """Each value's PASS/FAIL lines under its name."""
    blocks = [f"[{split.attribute} = {value}]\n{budget_text(r)}" for value, _, r in split.parts]
    return "\n\n".join(blocks)


def split_budget_dict(split: Split[BudgetResult]) -> dict[str, Any]:
    """``check --split-by --format json``."""
    return {
        "split_by": split.attribute,
        "passed": all(r.passed for _, _, r in split.parts),
        "splits": [{"value": value, "traces": n} | budget_dict(r) for value, n, r in split.parts],
    }
