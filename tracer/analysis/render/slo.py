"""SLO attainment over traces (``hoptrace analyze --slo``) as JSON and as a table."""

from __future__ import annotations

from typing import Any

from tracer.analysis.checks.slo import SloAnalysis
from tracer.analysis.render.json_out import number
from tracer.analysis.render.sections import Section, fmt_ms, fmt_pct, group_label

__all__ = ["slo_dict", "slo_sections"]


def slo_dict(result: SloAnalysis) -> dict[str, Any]:
    """The ``slo`` object ``analyze --slo --format json`` adds (``docs/analysis.md``)."""
    return {
        "limits_ms": {m: number(v) for m, v in result.slo.limits_ms},
        "traces": result.traces,
        "meeting": result.meeting,
        "missing": result.missing,
        "attainment": number(result.attainment),
        "attainment_by_metric": {m: number(v) for m, v in result.attainment_by_metric},
        "without_ttft": result.without_ttft,
        **(
            {}
            if result.estimate is None
            else {
                "attainment_interval": [
                    number(result.estimate[1].low),
                    number(result.estimate[1].high),
                ],
                "goodput_per_s": None
                if result.goodput_per_s is None
                else number(result.goodput_per_s[0]),
                "goodput_per_s_interval": None
                if result.goodput_per_s is None
                else [number(result.goodput_per_s[1].low), number(result.goodput_per_s[1].high)],
            }
        ),
        "lost_by": [
            {
                "name": g.name,
                "missing_mean_ms": number(g.missing_mean_ms),
                "meeting_mean_ms": number(g.meeting_mean_ms),
                "extra_ms": number(g.extra_ms),
            }
            for g in result.losses
        ],
    }


def slo_sections(result: SloAnalysis) -> list[Section]:
    """Attainment, and per group how much longer it took in the traces that miss."""
    by_stage = result.group_by == "stage"
    attained = fmt_pct(result.attainment)
    if result.estimate is not None:
        iv = result.estimate[1]
        attained += f" ({iv.low * 100:.1f}-{iv.high * 100:.1f}, estimated from a sample)"
    section = Section(
        f"SLO {result.slo.describe()}: {attained} of {result.traces} traces meet it",
        [result.group_by, "mean ms, missing", "mean ms, meeting", "extra ms when missing"],
    )
    for g in result.losses:
        section.rows.append(
            [
                group_label(g.name, by_stage),
                fmt_ms(g.missing_mean_ms),
                fmt_ms(g.meeting_mean_ms),
                f"{round(g.extra_ms, 1) or 0.0:+,.1f}",
            ]
        )
    if result.goodput_per_s is not None:
        rate, iv = result.goodput_per_s
        section.notes.append(
            f"goodput: {rate:,.1f} requests/s meet it ({iv.low:,.1f}-{iv.high:,.1f}), "
            "estimated from the sample"
        )
    section.notes.append(
        "per limit: "
        + ", ".join(f"{m} {fmt_pct(v)}" for m, v in result.attainment_by_metric)
        + f"; {result.missing} traces miss at least one"
    )
    if result.losses and result.losses[0].extra_ms > 0:
        top = result.losses[0]
        section.notes.append(
            f"where the SLO is lost: {top.name} took {top.extra_ms:,.1f} ms more (mean) in "
            "the traces that miss it than in those that meet it"
        )
    elif not result.losses:
        section.notes.append(
            "every trace meets the SLO" if not result.missing else "no trace meets the SLO"
        )
    if result.without_ttft:
        section.notes.append(
            f"{result.without_ttft} traces have no time to first token (not streamed): "
            "they count as missing the ttft limit"
        )
    return [section]
