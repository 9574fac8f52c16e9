"""From sources to an :class:`Analysis`: large OTLP JSON-lines files on every core,
everything else loaded and attributed in this process."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tracer._sources import is_url
from tracer.analysis.aggregate import Analysis, analyze
from tracer.analysis.loaders import load, parse_duration
from tracer.analysis.loaders._http import QUIET, Listener
from tracer.analysis.prepare import StageMap
from tracer.analysis.traceset import TraceFilter, TraceSet

__all__ = ["Progress", "analyze_sources"]

#: ``progress(phase, done, total)``: phase ``"reading"`` with bytes, then ``"attributing"``.
Progress = Callable[[str, int, int], None]


def analyze_sources(
    sources: Sequence[str],
    *,
    group_by: str = "stage",
    stage_map: StageMap | None = None,
    service: str | None = None,
    operation: str | None = None,
    run: str | None = None,
    since: str | None = None,
    limit: int | None = None,
    keep_traces: bool = False,
    progress: Progress | None = None,
    backend: str = "auto",
    query: str | None = None,
    listener: Listener = QUIET,
) -> tuple[Analysis, TraceSet | None]:
    """Load and attribute the selected traces of ``sources``.

    Large OTLP JSON-lines files (``HOPTRACE_WORKERS`` processes, one per CPU by
    default) are read in byte ranges by worker processes, with the same result as the
    serial path; that path keeps no spans, so it is taken only when ``keep_traces`` is
    false and no ``limit`` asks for the newest traces. ``backend``, ``query`` and
    ``listener`` are for trace backend URLs, as in :func:`load`.

    Returns:
        The analysis, and the loaded traces (None when the parallel path ran).

    Raises:
        SourceError, NoUsableDataError, ConfigError: as :func:`load` and :func:`analyze`.
    """
    if not keep_traces and limit is None and query is None:
        result = _parallel(sources, group_by, stage_map, service, operation, run, since, progress)
        if result is not None:
            return result, None
    traces = load(
        list(sources),
        service=service,
        operation=operation,
        limit=limit,
        since=since,
        run=run,
        backend=backend,
        query=query,
        listener=listener,
    )
    return analyze(traces, group_by, stage_map), traces


def _parallel(
    sources: Sequence[str],
    group_by: str,
    stage_map: StageMap | None,
    service: str | None,
    operation: str | None,
    run: str | None,
    since: str | None,
    progress: Progress | None,
) -> Analysis | None:
    from tracer.analysis._bigfile import analyze_files, eligible
    from tracer.analysis._parallel import workers

    if not sources or any(is_url(s) for s in sources):
        return None
    paths = [Path(s).expanduser() for s in sources]
    count = workers()
    if count < 2 or not eligible(paths):
        return None
    since_ns = time.time_ns() - int(parse_duration(since) * 1e9) if since else None
    keep = TraceFilter(service, operation, run, since_ns)
    return analyze_files(paths, group_by, stage_map, count, keep, progress)
