"""Benchmark an OpenAI-compatible chat endpoint the careful way, every request traced
(``hoptrace bench``; docs/bench.md).

    from tracer.bench import run_bench
    result = run_bench("http://127.0.0.1:8000/v1", api_key="...", levels=[1, 4, 8])

``run.py`` runs the levels and measures them (:func:`run_bench`, :class:`BenchResult`),
``args.py`` checks its arguments, ``openloop.py`` sends the open loop's arrivals,
``chat_protocol.py`` reads each answer strictly. How a sweep is judged (goodput, SLO
attainment, the knee) is the analyzer's: :mod:`tracer.analysis.checks.sweep`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracer._lazy import exports

if TYPE_CHECKING:
    from tracer.analysis.checks.sweep import Knee, find_knee, stage_growth
    from tracer.bench.args import check_arguments, warmup_requests
    from tracer.bench.run import (
        DEFAULT_PROMPT,
        RUN_ATTRIBUTE,
        BenchResult,
        LevelResult,
        Sample,
        run_bench,
    )

#: Where each name lives: imported on first use (PEP 562), so that the bench's parts
#: (the open loop, the argument checks) load without httpx and the analyzer.
_HOME = {
    "BenchResult": "tracer.bench.run",
    "DEFAULT_PROMPT": "tracer.bench.run",
    "Knee": "tracer.analysis.checks.sweep",
    "LevelResult": "tracer.bench.run",
    "RUN_ATTRIBUTE": "tracer.bench.run",
    "Sample": "tracer.bench.run",
    "check_arguments": "tracer.bench.args",
    "find_knee": "tracer.analysis.checks.sweep",
    "run_bench": "tracer.bench.run",
    "stage_growth": "tracer.analysis.checks.sweep",
    "warmup_requests": "tracer.bench.args",
}

__getattr__, __dir__ = exports(__name__, _HOME)

__all__ = [
    "DEFAULT_PROMPT",
    "RUN_ATTRIBUTE",
    "BenchResult",
    "Knee",
    "LevelResult",
    "Sample",
    "check_arguments",
    "find_knee",
    "run_bench",
    "stage_growth",
    "warmup_requests",
]
