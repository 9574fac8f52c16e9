"""hoptrace's analyzer: critical-path stage shares, what-if, compare and TTFT.

    from tracer.analysis import Query, load, analyze, what_if
    traces = load(["traces.jsonl"], Query(service="gateway", since="2h"))
    result = analyze(traces, group_by="stage")
    projection = what_if(traces, stage="inference", speedup=100)

Semantics: ``docs/analysis.md``. Results are frozen dataclasses; rendering is in
``tracer.analysis.render``.
"""

from __future__ import annotations

from tracer.analysis.aggregate import (
    Analysis,
    GroupStats,
    HopStats,
    Stats,
    TokenStats,
    analyze,
    stats,
)
from tracer.analysis.checks.compare import Comparison, GroupDelta, compare
from tracer.analysis.conventions.stage_map import StageMapRules, load_stage_map
from tracer.analysis.execution.pipeline import analyze_sources, exemplar_traces
from tracer.analysis.loaders import load, parse_duration
from tracer.analysis.model.breakdown import TraceBreakdown, break_down
from tracer.analysis.model.critical_path import own_times
from tracer.analysis.model.prepare import PreparedTrace, prepare
from tracer.analysis.model.traceset import TraceSet
from tracer.analysis.query import Query
from tracer.analysis.whatif.retime import WhatIf, ideal_speedup, retime, what_if
from tracer.analysis.whatif.waterfall import Waterfall, WaterfallRow, exemplar_waterfalls, waterfall
from tracer.spans.model import Span, Warnings

__all__ = [
    "Analysis",
    "Comparison",
    "GroupDelta",
    "GroupStats",
    "HopStats",
    "PreparedTrace",
    "Query",
    "Span",
    "StageMapRules",
    "Stats",
    "TokenStats",
    "TraceBreakdown",
    "TraceSet",
    "Warnings",
    "Waterfall",
    "WaterfallRow",
    "WhatIf",
    "analyze",
    "analyze_sources",
    "break_down",
    "compare",
    "exemplar_traces",
    "exemplar_waterfalls",
    "ideal_speedup",
    "load",
    "load_stage_map",
    "own_times",
    "parse_duration",
    "prepare",
    "retime",
    "stats",
    "waterfall",
    "what_if",
]
