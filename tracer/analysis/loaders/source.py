"""The interface every kind of trace source has: :class:`Source` (load, stream, read
again), and :class:`LoadedWhole`, the base of the kinds that are only ever loaded.

The kinds are in :mod:`.local` (files, the store, standard input, pipes) and
:mod:`.backends` (Jaeger and Tempo URLs); :func:`~tracer.analysis.loaders.sources.open_source`
picks one for what the user gave.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from tracer.analysis.loaders._http import QUIET, Listener
from tracer.analysis.model.traceset import TraceSet
from tracer.analysis.query import Query

if TYPE_CHECKING:
    from tracer.analysis.aggregate import Analysis

__all__ = ["LoadedWhole", "Places", "Progress", "Source"]

#: ``progress(phase, done, total)``, as :data:`tracer.analysis.execution.pipeline.Progress`.
Progress = Callable[[str, int, int], None]
#: Where a streamed trace was: trace id -> (``seq``, ``last_end``) of its table row.
Places = dict[str, tuple[int, int]]


class Source(Protocol):
    """One kind of trace source, opened."""

    #: What messages call it.
    label: str

    def load(self, into: TraceSet, query: Query, ids: list[str] | None, hear: Listener) -> None:
        """Add the spans of this source to ``into`` (only the traces ``ids`` when
        given, where the source can be asked for them; the caller keeps those)."""

    def stream(self, query: Query, progress: Progress | None, hear: Listener) -> Analysis | None:
        """The analysis of this source without keeping its spans, or None when this
        source (or this query) is not streamed: then it is loaded."""

    def reread(self, places: Places, query: Query) -> TraceSet:
        """The spans of the traces at ``places``, which :meth:`stream` attributed."""


class LoadedWhole:
    """A source that is only ever loaded whole: it does not stream, and a few of its
    traces are read again by loading it and keeping them."""

    label: str

    def load(self, into: TraceSet, query: Query, ids: list[str] | None, hear: Listener) -> None:
        raise NotImplementedError

    def stream(self, query: Query, progress: Progress | None, hear: Listener) -> Analysis | None:
        return None

    def reread(self, places: Places, query: Query) -> TraceSet:
        found = TraceSet()
        self.load(found, query, list(places), QUIET)
        found.attach_events()
        return found.subset(places)
