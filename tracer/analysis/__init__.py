"""hoptrace's analyzer: critical-path stage shares, what-if, compare and TTFT.

    from tracer.analysis import load, analyze, what_if
    traces = load(["traces.jsonl"])
    result = analyze(traces, group_by="stage")
    projection = what_if(traces, stage="inference", speedup=100)

Semantics: SPEC.md sections 3 to 9. Results are frozen dataclasses; rendering is in
``tracer.analysis.render``.
"""

from __future__ import annotations

from tracer.analysis.aggregate import (
    Analysis,
    GroupStats,
    HopStats,
    Stats,
    TokenStats,
    Warnings,
    analyze,
    stats,
)
from tracer.analysis.breakdown import TraceBreakdown, break_down
from tracer.analysis.compare import Comparison, GroupDelta, compare
from tracer.analysis.critical_path import own_times
from tracer.analysis.loaders import load, parse_duration
from tracer.analysis.model import LoadWarnings, Span
from tracer.analysis.prepare import PreparedTrace, TraceIssues, prepare
from tracer.analysis.stage_map import StageMapRules, load_stage_map
from tracer.analysis.traceset import TraceSet
from tracer.analysis.whatif import WhatIf, ideal_speedup, retime, what_if

__all__ = [
    "Analysis",
    "Comparison",
    "GroupDelta",
    "GroupStats",
    "HopStats",
    "LoadWarnings",
    "PreparedTrace",
    "Span",
    "StageMapRules",
    "Stats",
    "TokenStats",
    "TraceBreakdown",
    "TraceIssues",
    "TraceSet",
    "Warnings",
    "WhatIf",
    "analyze",
    "break_down",
    "compare",
    "ideal_speedup",
    "load",
    "load_stage_map",
    "own_times",
    "parse_duration",
    "prepare",
    "retime",
    "stats",
    "what_if",
]
