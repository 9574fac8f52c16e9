"""Renderers: JSON (the contract in ``docs/analysis.md``), rich tables, Markdown and
one-file HTML. They consume the analysis results and compute nothing of their own."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracer._lazy import exports

if TYPE_CHECKING:
    from tracer.analysis.render.bench import bench_dict, bench_sections
    from tracer.analysis.render.budget import budget_dict, budget_text
    from tracer.analysis.render.html import Report, to_html
    from tracer.analysis.render.json_out import (
        analysis_dict,
        comparison_dict,
        dumps,
        stats_dict,
        whatif_dict,
    )
    from tracer.analysis.render.runs import runs_dict, runs_sections
    from tracer.analysis.render.sections import (
        Section,
        analysis_sections,
        comparison_sections,
        whatif_headline,
        whatif_sections,
    )
    from tracer.analysis.render.slo import slo_dict, slo_sections
    from tracer.analysis.render.split import (
        split_analysis_dict,
        split_analysis_sections,
        split_budget_dict,
        split_budget_text,
        split_whatif_dict,
        split_whatif_sections,
    )
    from tracer.analysis.render.text import to_markdown, to_table

#: Where each name lives: imported on first use (PEP 562), so that writing JSON does
#: not import the rich and HTML renderers.
_HOME = {
    "Report": "tracer.analysis.render.html",
    "Section": "tracer.analysis.render.sections",
    "analysis_dict": "tracer.analysis.render.json_out",
    "analysis_sections": "tracer.analysis.render.sections",
    "bench_dict": "tracer.analysis.render.bench",
    "bench_sections": "tracer.analysis.render.bench",
    "budget_dict": "tracer.analysis.render.budget",
    "budget_text": "tracer.analysis.render.budget",
    "comparison_dict": "tracer.analysis.render.json_out",
    "comparison_sections": "tracer.analysis.render.sections",
    "dumps": "tracer.analysis.render.json_out",
    "runs_dict": "tracer.analysis.render.runs",
    "runs_sections": "tracer.analysis.render.runs",
    "slo_dict": "tracer.analysis.render.slo",
    "slo_sections": "tracer.analysis.render.slo",
    "split_analysis_dict": "tracer.analysis.render.split",
    "split_analysis_sections": "tracer.analysis.render.split",
    "split_budget_dict": "tracer.analysis.render.split",
    "split_budget_text": "tracer.analysis.render.split",
    "split_whatif_dict": "tracer.analysis.render.split",
    "split_whatif_sections": "tracer.analysis.render.split",
    "stats_dict": "tracer.analysis.render.json_out",
    "to_html": "tracer.analysis.render.html",
    "to_markdown": "tracer.analysis.render.text",
    "to_table": "tracer.analysis.render.text",
    "whatif_dict": "tracer.analysis.render.json_out",
    "whatif_headline": "tracer.analysis.render.sections",
    "whatif_sections": "tracer.analysis.render.sections",
}

__all__ = [
    "Report",
    "Section",
    "analysis_dict",
    "analysis_sections",
    "bench_dict",
    "bench_sections",
    "budget_dict",
    "budget_text",
    "comparison_dict",
    "comparison_sections",
    "dumps",
    "runs_dict",
    "runs_sections",
    "slo_dict",
    "slo_sections",
    "split_analysis_dict",
    "split_analysis_sections",
    "split_budget_dict",
    "split_budget_text",
    "split_whatif_dict",
    "split_whatif_sections",
    "stats_dict",
    "to_html",
    "to_markdown",
    "to_table",
    "whatif_dict",
    "whatif_headline",
    "whatif_sections",
]


__getattr__, __dir__ = exports(__name__, _HOME)
