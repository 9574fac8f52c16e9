"""Loaders: turn any trace source into a :class:`TraceSet` (sources: README, Analyze).

A source is a span store file, an OTLP JSON, Jaeger JSON or Tempo JSON file, a folder
of them, standard input, or a Jaeger or Grafana Tempo query URL (docs/sources.md).
:func:`~tracer.analysis.loaders.sources.open_source` picks its kind, in one place: a
file's is told from its content, a URL's by asking it. One module per format
(``files``, ``store``, ``jaeger_query``, ``tempo``, ``url``); the kinds over them
(``source``: the interface; ``local``, ``backends``) load, stream and read again.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

from tracer.analysis.loaders._http import QUIET, Listener
from tracer.analysis.loaders.sources import gather, open_source, reading
from tracer.analysis.model.traceset import TraceSet
from tracer.analysis.query import Query, parse_duration

__all__ = ["load", "parse_duration"]


def load(
    sources: Sequence[str | Path],
    query: Query | None = None,
    *,
    trace_ids: Collection[str] | None = None,
    listener: Listener = QUIET,
) -> TraceSet:
    """Load every source into one :class:`TraceSet`, keeping the traces ``query``
    selects.

    Args:
        sources: files, folders, store files, Jaeger or Tempo URLs, ``-`` for standard
            input; the default store when empty. Each is opened as its kind
            (:func:`~tracer.analysis.loaders.sources.open_source`).
        query: the filters (service, operation, run, since), the newest ``limit``, and
            how URLs are read (``backend``, ``traceql``, ``max_answer_bytes``); a URL
            is searched for the traces that started within ``since`` (else an hour).
            A search answer past ``max_answer_bytes`` is a SourceError; a trace past
            it is skipped and counted.
        trace_ids: only these traces; a URL is asked for them by id, not searched.
        listener: told which backend a URL is and how fetching many traces goes.

    Raises:
        SourceError: a source that does not exist, cannot be opened, or a backend
            that does not answer or refuses the search.
        ConfigError: a bad ``max_answer_bytes``, or a TraceQL search without a
            Tempo URL.
    """
    query = query or Query()
    with reading(query):
        source = open_source(sources, query, listener)
        return gather(source, query, trace_ids=trace_ids, listener=listener)
