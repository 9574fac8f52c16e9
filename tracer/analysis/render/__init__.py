"""Renderers: JSON (the contract in ``docs/analysis.md``), rich tables, Markdown and
one-file HTML. They consume the analysis results and compute nothing of their own."""

from __future__ import annotations

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
from tracer.analysis.render.sections import (
    Section,
    analysis_sections,
    comparison_sections,
    whatif_headline,
    whatif_sections,
)
from tracer.analysis.render.split import (
    split_analysis_dict,
    split_analysis_sections,
    split_budget_dict,
    split_budget_text,
    split_whatif_dict,
    split_whatif_sections,
)
from tracer.analysis.render.text import to_markdown, to_table

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
