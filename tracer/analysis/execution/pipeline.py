"""From sources to an :class:`Analysis`: the sources opened as their kind
(:mod:`tracer.analysis.loaders.sources`), streamed where they can be (OTLP JSON-lines
files and the span store on every core, or with ``--engine dask`` on a Dask cluster
with a Grafana Tempo URL), everything else loaded and attributed in this process."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from tracer.analysis.aggregate import Analysis, analyze
from tracer.analysis.loaders._http import QUIET, Listener
from tracer.analysis.loaders.sources import gather, open_source, reading
from tracer.analysis.model.traceset import TraceSet
from tracer.analysis.query import ENGINES, Query
from tracer.analysis.sampling._sketch import exact_traces as exact_limit

__all__ = ["ENGINES", "Progress", "analyze_sources", "exemplar_traces"]

#: ``progress(phase, done, total)``: phase ``"reading"`` with bytes, then ``"attributing"``
#: (the Dask engine: files then ``"joining"`` with the number of traces that had several
#: parts; the store ``"attributing"`` with trace-id ranges done; a Tempo URL
#: ``"fetching"`` with traces fetched and attributed).
Progress = Callable[[str, int, int], None]


def analyze_sources(
    sources: Sequence[str],
    query: Query | None = None,
    *,
    progress: Progress | None = None,
    listener: Listener = QUIET,
) -> tuple[Analysis, TraceSet | None]:
    """Load and attribute the traces of ``sources`` that ``query`` selects, as it asks.

    The sources are opened once (:func:`~tracer.analysis.loaders.sources.open_source`)
    and, unless the query keeps the traces, streamed where their kind can be: OTLP
    JSON-lines files in bounded memory (``docs/scaling.md``), with the same result as
    loading them whole, large ones (64 MB or more) on ``query.workers`` processes
    (else ``HOPTRACE_WORKERS``, else one per CPU; 1 keeps it to this process); the span
    store trace by trace. A ``limit`` (the newest traces) or a TraceQL search loads
    them whole instead. Percentiles are exact up to ``query.exact_traces`` traces (else
    ``HOPTRACE_EXACT_TRACES``, else ten million), then from a DDSketch to within 1%
    (``docs/analysis.md``). ``listener`` hears what a URL is and how fetching goes.

    With ``query.engine == "dask"`` files (any size) and the span store stream on the
    Dask scheduler at ``query.scheduler`` (or a local cluster started for the call),
    and a Grafana Tempo URL's traces are fetched and attributed on it; other sources
    are read in this process, and ``listener`` is told so.

    Returns:
        The analysis, and the loaded traces (None when the sources were streamed).

    Raises:
        SourceError, NoUsableDataError, ConfigError: as :func:`load` and :func:`analyze`;
            ConfigError also for no Dask, or an unreachable scheduler.
    """
    query = query or Query()
    query = query.but(exact_traces=exact_limit(query.exact_traces))  # fails before reading
    with reading(query):
        source = open_source(sources, query, listener)
        if not query.keep_traces:
            result = source.stream(query, progress, listener)
            if result is not None:
                return result, None
        if query.engine == "dask":
            listener.found(
                "--engine dask runs on OTLP JSON-lines files, the span store and a Grafana "
                "Tempo URL; these sources (or this command's options) are read in this process"
            )
        traces = gather(source, query, listener=listener)
    result = analyze(
        traces,
        query.group_by,
        query.stage_map,
        split_by=query.split_by,
        projection=query.projection,
        exact_traces=query.exact_traces,
    )
    return result, traces


def exemplar_traces(
    sources: Sequence[str], analysis: Analysis, query: Query | None = None
) -> TraceSet:
    """The spans of the exemplar traces of ``analysis``, which :func:`analyze_sources`
    streamed from ``sources`` (read as ``query`` says) without keeping spans: read
    again from the lines they were on (files), or by trace id (the span store, a
    Tempo URL).

    Raises:
        SourceError: a source can no longer be read.
    """
    cols = analysis.columns
    where = {}
    for trace_id in dict.fromkeys(analysis.exemplars.values()):
        rows = np.nonzero(cols.ids == trace_id)[0]
        if rows.size:
            r = int(rows[0])
            where[trace_id] = (int(cols.seq[r]), int(cols.last_end[r]))
    if not where:
        return TraceSet()
    query = query or Query()
    with reading(query):
        return open_source(sources, query).reread(where, query)
