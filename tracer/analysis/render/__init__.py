"""Renderers: JSON (SPEC.md section 8), rich tables and Markdown."""

from __future__ import annotations

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
    comparison_sections,
    whatif_headline,
    whatif_sections,
)
from tracer.analysis.render.text import to_markdown, to_table

__all__ = [
    "Section",
    "analysis_dict",
    "analysis_sections",
    "comparison_dict",
    "comparison_sections",
    "cost_per_request",
    "dumps",
    "to_markdown",
    "to_table",
    "whatif_dict",
    "whatif_headline",
    "whatif_sections",
]
