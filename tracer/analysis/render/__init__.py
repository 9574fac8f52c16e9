"""Renderers: JSON (SPEC.md section 8), rich tables, Markdown and one-file HTML."""

from __future__ import annotations

from tracer.analysis.render.html import Report, exemplar_waterfalls, to_html
from tracer.analysis.render.json_out import (
    analysis_dict,
    comparison_dict,
    cost_per_request,
    dumps,
    whatif_dict,
)
from tracer.analysis.render.sections import (
    Section,
    analysis_sections,
    bench_sections,
    comparison_sections,
    whatif_headline,
    whatif_sections,
)
from tracer.analysis.render.text import to_markdown, to_table

__all__ = [
    "Report",
    "Section",
    "analysis_dict",
    "analysis_sections",
    "bench_sections",
    "comparison_dict",
    "comparison_sections",
    "cost_per_request",
    "dumps",
    "exemplar_waterfalls",
    "to_html",
    "to_markdown",
    "to_table",
    "whatif_dict",
    "whatif_headline",
    "whatif_sections",
]
