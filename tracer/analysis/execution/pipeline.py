"""From sources to an :class:`Analysis`: large OTLP JSON-lines files on every core
(or, with ``engine="dask"``, files and the span store on a Dask cluster), everything
else loaded and attributed in this process."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tracer._errors import ConfigError, SourceError
from tracer._sources import is_url
from tracer.analysis._sketch import exact_traces as exact_limit
from tracer.analysis._table import Projected
from tracer.analysis.aggregate import Analysis, analyze
from tracer.analysis.loaders import load, parse_duration
from tracer.analysis.loaders._http import QUIET, Listener
from tracer.analysis.prepare import PreparedTrace, StageMap
from tracer.analysis.traceset import TraceFilter, TraceSet

__all__ = ["ENGINES", "Progress", "analyze_sources", "exemplar_traces"]

#: ``progress(phase, done, total)``: phase ``"reading"`` with bytes, then ``"attributing"``
#: (the Dask engine: files then ``"joining"`` with the number of traces that had several
#: parts; the store ``"attributing"`` with trace-id ranges done; a Tempo URL
#: ``"fetching"`` with traces fetched and attributed).
Progress = Callable[[str, int, int], None]

#: Where files and the store are analysed: forked processes here, or a Dask cluster.
ENGINES = ("local", "dask")


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
    workers: int | None = None,
    window_spans: int | None = None,
    split_by: str | None = None,
    projection: Callable[[PreparedTrace], Projected] | None = None,
    exact_traces: int | None = None,
    engine: str = "local",
    scheduler: str | None = None,
) -> tuple[Analysis, TraceSet | None]:
    """Load and attribute the selected traces of ``sources``.

    OTLP JSON-lines files are streamed in bounded memory (``docs/scaling.md``), with
    the same result as loading them whole; large ones (64 MB or more) on ``workers``
    processes (else ``HOPTRACE_WORKERS``, else one per CPU; 1 keeps it to this
    process). ``window_spans`` (else ``HOPTRACE_WINDOW_SPANS``) is the streaming
    window. That path keeps no spans, so it is taken only when ``keep_traces`` is
    false and no ``limit`` asks for the newest traces. ``backend``, ``query`` and
    ``listener`` are for trace backend URLs, as in :func:`load`. ``split_by`` keeps each
    trace's value of that attribute (:func:`~tracer.analysis.split.split_analysis`);
    ``projection`` (a :class:`~tracer.analysis.whatif.Projection`) each trace's what-if
    (its :meth:`~tracer.analysis.whatif.Projection.result`); on every path. Percentiles
    are exact up to ``exact_traces`` traces (else ``HOPTRACE_EXACT_TRACES``, else ten
    million), then from a DDSketch to within 1% (``docs/analysis.md``).

    ``engine="dask"`` streams OTLP JSON-lines files (any size) and the span store on
    the Dask scheduler at ``scheduler`` (``tcp://host:port``), or on a local cluster
    of ``workers`` processes started for the call (``docs/scaling.md``), and fetches
    and attributes the traces a search of one Grafana Tempo URL finds on it; other
    sources are read in this process, and ``listener`` is told so.

    Returns:
        The analysis, and the loaded traces (None when the parallel path ran).

    Raises:
        SourceError, NoUsableDataError, ConfigError: as :func:`load` and :func:`analyze`;
            ConfigError also for a bad engine, no Dask, or an unreachable scheduler.
    """
    if engine not in ENGINES:
        raise ConfigError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if scheduler is not None and engine != "dask":
        raise ConfigError("a scheduler address is for the Dask engine: add --engine dask")
    exact_traces = exact_limit(exact_traces)  # a bad setting fails before reading
    if not keep_traces and limit is None and query is None:
        result = _streamed(
            sources,
            group_by,
            stage_map,
            TraceFilter(service, operation, run, _since_ns(since)),
            progress,
            workers,
            window_spans,
            {"split_by": split_by, "projection": projection, "exact_traces": exact_traces},
            engine,
            scheduler,
        )
        if result is not None:
            return result, None
    if engine == "dask":
        if not keep_traces and len(sources) == 1 and is_url(str(sources[0])):
            from tracer.analysis.loaders.url import resolve_backend

            # Resolved once: a Jaeger URL is then loaded below without asking again.
            backend = resolve_backend(str(sources[0]), backend, listener)
            if backend == "tempo":
                return _tempo_on_dask(
                    str(sources[0]),
                    since,
                    group_by=group_by,
                    stage_map=stage_map,
                    selection=TraceFilter(service, operation, run, _since_ns(since)),
                    progress=progress,
                    service=service,
                    operation=operation,
                    query=query,
                    limit=limit,
                    scheduler=scheduler,
                    workers=workers,
                    split_by=split_by,
                    projection=projection,
                    exact_traces=exact_traces,
                ), None
        listener.found(
            "--engine dask runs on OTLP JSON-lines files, the span store and a Grafana "
            "Tempo URL; these sources (or this command's options) are read in this process"
        )
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
    result = analyze(
        traces,
        group_by,
        stage_map,
        split_by=split_by,
        projection=projection,
        exact_traces=exact_traces,
    )
    return result, traces


def _tempo_on_dask(url: str, since: str | None, **kwargs: Any) -> Analysis:
    """A Tempo URL on Dask: searched here, fetched and attributed on the workers
    (:func:`~tracer.analysis.execution.dask_engine.analyze_tempo` with ``kwargs``)."""
    from tracer.analysis.execution import dask_engine as _dask

    lookback_s = parse_duration(since) if since else 3600.0
    return _dask.analyze_tempo(url, lookback_s=lookback_s, **kwargs)


def _since_ns(since: str | None) -> int | None:
    return time.time_ns() - int(parse_duration(since) * 1e9) if since else None


def _streamed(
    sources: Sequence[str],
    group_by: str,
    stage_map: StageMap | None,
    keep: TraceFilter,
    progress: Progress | None,
    workers: int | None,
    window_spans: int | None,
    extra: dict[str, Any],
    engine: str = "local",
    scheduler: str | None = None,
) -> Analysis | None:
    from collector.store import default_store_path, is_store_file
    from tracer.analysis.execution.bigfile import analyze_files, analyze_store, eligible
    from tracer.analysis.execution.parallel import workers as worker_count

    if any(is_url(s) or s == "-" for s in sources):
        return None
    paths = [Path(s).expanduser() for s in sources] or [default_store_path()]
    if len(paths) == 1 and paths[0].is_file() and is_store_file(paths[0]):
        worker_count(workers)  # a bad setting is an error on every path
        if engine == "dask":
            from tracer.analysis.execution import dask_engine as _dask

            return _dask.analyze_store(
                paths[0],
                group_by,
                stage_map,
                keep,
                progress,
                scheduler=scheduler,
                workers=workers,
                **extra,
            )
        return analyze_store(paths[0], group_by, stage_map, keep, **extra)
    if not eligible(paths, min_bytes=0):
        return None
    if engine == "dask":
        from tracer.analysis.execution import dask_engine as _dask

        return _dask.analyze_files(
            paths, group_by, stage_map, keep, progress, window_spans,
            scheduler=scheduler, workers=workers, **extra,
        )  # fmt: skip
    count = worker_count(workers)
    if count > 1 and not eligible(paths):
        count = 1  # small: forking costs more than it saves
    return analyze_files(paths, group_by, stage_map, count, keep, progress, window_spans, **extra)


def exemplar_traces(sources: Sequence[str], analysis: Analysis) -> TraceSet:
    """The spans of the exemplar traces of ``analysis``, which :func:`analyze_sources`
    streamed from ``sources`` without keeping spans: read again from the lines they
    were on (files), or fetched by trace id (the span store).

    Raises:
        SourceError: a source can no longer be read.
    """
    from collector.store import SpanStore, default_store_path, is_store_file
    from tracer.analysis.execution.stream import read_traces

    cols = analysis.columns
    where = {}
    for trace_id in dict.fromkeys(analysis.exemplars.values()):
        rows = np.nonzero(cols.ids == trace_id)[0]
        if rows.size:
            r = int(rows[0])
            where[trace_id] = (int(cols.seq[r]), int(cols.last_end[r]))
    found = TraceSet()
    if not where:
        return found
    paths = [Path(s).expanduser() for s in sources] or [default_store_path()]
    if len(paths) == 1 and paths[0].is_file() and is_store_file(paths[0]):
        with SpanStore(str(paths[0]), read_only=True) as store:
            found.add(store.spans_of(where))
        return found
    try:
        return read_traces([str(p) for p in paths], where)
    except OSError as exc:
        raise SourceError(
            f"cannot read {exc.filename!r} again for the exemplar traces: {exc.strerror}"
        ) from None
