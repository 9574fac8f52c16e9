"""The trace backends a URL can be: Jaeger's and Grafana Tempo's query APIs, as
:class:`~tracer.analysis.loaders.source.Source` kinds. What a URL is, it is asked once
(:func:`~tracer.analysis.loaders.url.resolve_backend`), unless ``--backend`` says."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from tracer._sources import is_url, shown
from tracer.analysis.loaders._http import Listener
from tracer.analysis.loaders.source import LoadedWhole, Progress, Source
from tracer.analysis.loaders.url import load_url, resolve_backend
from tracer.analysis.model.traceset import TraceSet
from tracer.analysis.query import Query

if TYPE_CHECKING:
    from tracer.analysis.aggregate import Analysis

__all__ = ["Backend", "JaegerQuery", "TempoQuery", "TraceBackend"]


class TraceBackend:
    """An http(s) URL: asked (unless ``--backend`` says) whether it is Jaeger or Tempo."""

    @staticmethod
    def recognise(text: str) -> bool:
        return is_url(text)

    @classmethod
    def open(cls, text: str, query: Query, hear: Listener) -> Source:
        kind = resolve_backend(text, query.backend, hear)
        return TempoQuery(text) if kind == "tempo" else JaegerQuery(text)


class Backend(LoadedWhole):
    """A trace backend's query API at ``url``, read through :func:`load_url`."""

    kind: ClassVar[str]

    def __init__(self, url: str) -> None:
        self.url = url
        self.label = shown(url)

    def load(self, into: TraceSet, query: Query, ids: list[str] | None, hear: Listener) -> None:
        load_url(
            self.url,
            into,
            backend=self.kind,
            service=query.service,
            operation=query.operation,
            query=query.traceql,
            lookback_s=query.lookback_s,
            limit=query.limit,
            trace_ids=ids,
            listener=hear,
        )


class JaegerQuery(Backend):
    """Jaeger's query API (``http://host:16686``): searched and read in this process."""

    kind = "jaeger"


class TempoQuery(Backend):
    """Grafana Tempo's query API (``http://host:3200``); on Dask, searched here and
    fetched and attributed on the workers."""

    kind = "tempo"

    def stream(self, query: Query, progress: Progress | None, hear: Listener) -> Analysis | None:
        if query.engine != "dask" or query.keep_traces:
            return None
        from tracer.analysis.execution import dask_engine

        return dask_engine.analyze_tempo(self.url, query, progress)
