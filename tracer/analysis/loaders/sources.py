"""Every kind of trace source behind one interface, picked in one place.

:func:`open_source` looks at what the user gave (``-``, a URL, a folder, a pipe, a
span store, a file) and returns one :class:`~tracer.analysis.loaders.source.Source`
for all of it; the loader (:func:`~tracer.analysis.load`), the analysis
(:func:`~tracer.analysis.analyze_sources`) and the exemplar traces of a report
(:func:`~tracer.analysis.exemplar_traces`) all start there. Each kind recognises what
it reads (``recognise``, tried in the order of :data:`KINDS`) and opens it (``open``);
an opened source can:

- ``load``: add its spans to a :class:`TraceSet` (the loaders of this package);
- ``stream``: analyse itself without keeping its spans, when it can (OTLP JSON-lines
  files and the span store on every core or on Dask, a Grafana Tempo URL on Dask;
  ``tracer/analysis/execution/``), or say it cannot (None: it is loaded instead);
- ``reread``: the spans of a few traces again, after a stream (a report's exemplars).

The kinds: :mod:`.local` (OTLP JSON-lines files, other trace files, the span store,
standard input, pipes), :mod:`.backends` (Jaeger and Tempo URLs), and here the two
made of others (a folder, several sources of different kinds). A file's kind is told
from its content, never its name; what a URL is, by asking it (or ``--backend``),
once, when it is opened. Anything else is one :class:`SourceError`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Protocol

from tracer._errors import ConfigError, SourceError
from tracer._sources import is_url, shown
from tracer.analysis.loaders._http import ANSWER_LIMIT, QUIET, Listener, trace_ids_of
from tracer.analysis.loaders.backends import TraceBackend
from tracer.analysis.loaders.local import OtlpLines, Pipe, SpanStoreFile, Stdin, TraceFile
from tracer.analysis.loaders.source import LoadedWhole, Source
from tracer.analysis.model.traceset import TraceSet
from tracer.analysis.query import Query
from tracer.analysis.table._memory import gc_paused

__all__ = ["KINDS", "Folder", "Several", "gather", "open_source", "reading"]

_TRACE_SUFFIXES = (".json", ".jsonl", ".ndjson", ".db", ".sqlite")


class Folder(LoadedWhole):
    """A folder: every ``.json``, ``.jsonl``, ``.ndjson``, ``.db`` and ``.sqlite`` file
    under it, each opened as its own kind; one that cannot be read is skipped and
    counted, not fatal."""

    def __init__(self, path: Path, text: str) -> None:
        self.path, self.label = path, text

    @staticmethod
    def recognise(text: str) -> bool:
        return Path(text).expanduser().is_dir()

    @classmethod
    def open(cls, text: str, query: Query, hear: Listener) -> Source:
        return cls(Path(text).expanduser(), text)

    def load(self, into: TraceSet, query: Query, ids: list[str] | None, hear: Listener) -> None:
        files = sorted(
            p for p in self.path.rglob("*") if p.is_file() and p.suffix.lower() in _TRACE_SUFFIXES
        )
        if not files:
            raise SourceError(f"folder {self.label!r} holds no .json, .jsonl or .db trace files")
        for f in files:
            try:
                _kind_of(str(f)).open(str(f), query, hear).load(into, query, None, hear)
            except SourceError as exc:  # one unreadable file does not stop the folder
                into.warnings.skip(f"{f}: skipped: {exc}", 0)


class Several(LoadedWhole):
    """Sources of different kinds given together: loaded one after the other."""

    def __init__(self, parts: Sequence[Source]) -> None:
        self.parts = list(parts)
        self.label = ", ".join(p.label for p in self.parts)

    def load(self, into: TraceSet, query: Query, ids: list[str] | None, hear: Listener) -> None:
        for part in self.parts:
            part.load(into, query, ids, hear)


class _Kind(Protocol):
    """A kind of source: ``recognise`` what the user gave, ``open`` it."""

    def recognise(self, text: str) -> bool: ...

    def open(self, text: str, query: Query, hear: Listener) -> Source: ...


#: The kinds, in the order they are tried: the first that recognises a source opens it.
KINDS: tuple[_Kind, ...] = (Stdin, TraceBackend, Folder, Pipe, SpanStoreFile, OtlpLines, TraceFile)


def _kind_of(text: str) -> _Kind:
    for kind in KINDS:
        if kind.recognise(text):
            return kind
    if "://" in text:
        scheme = text.split("://", 1)[0]
        raise SourceError(
            f"trace source {shown(text)!r}: hoptrace reads http:// and https:// URLs (Jaeger, "
            f"Grafana Tempo), not {scheme}://; or give a trace file, a folder or a span store"
        )
    raise SourceError(
        f"trace source {text!r} does not exist; give a trace file, a folder, a span "
        "store, or a Jaeger or Tempo URL such as http://localhost:16686"
    )


def open_source(texts: Sequence[str | Path], query: Query, hear: Listener = QUIET) -> Source:
    """The one :class:`Source` of what the user gave: the default span store for
    nothing, the kind of one source, several OTLP JSON-lines files as one input, and
    other mixes loaded one after the other (:class:`Several`). A URL is asked what it
    is here (``hear`` is told).

    Raises:
        SourceError: a source that does not exist or is of no kind hoptrace reads;
            the default store when it does not exist yet; a URL that answers as
            neither backend.
        ConfigError: a TraceQL search (``query.traceql``) without a URL among them.
    """
    if query.traceql and not any(is_url(str(t)) for t in texts):
        raise ConfigError("--query is TraceQL for a Grafana Tempo URL; no source here is a URL")
    if not texts:
        from collector.store import default_store_path

        path = default_store_path()
        if not path.exists():
            raise SourceError(
                f"no traces yet: the default store {str(path)!r} does not exist; "
                "'hoptrace demo' or 'hoptrace serve' fills it, 'hoptrace collect' receives "
                "your own services' spans into it, or give a trace file, store or URL"
            )
        texts = [path]
    parts = []
    for source in texts:
        text = str(source)
        parts.append(_kind_of(text).open(text, query, hear))
    if len(parts) == 1:
        return parts[0]
    if all(isinstance(p, OtlpLines) for p in parts):
        return OtlpLines([path for p in parts for path in p.paths])  # type: ignore[attr-defined]
    return Several(parts)


@contextlib.contextmanager
def reading(query: Query) -> Iterator[None]:
    """Read trace backend URLs in the block with ``query.max_answer_bytes`` as the
    largest answer (None: ``$HOPTRACE_MAX_ANSWER_BYTES``, else 256 MiB).

    Raises:
        ConfigError: a bad size (before anything is read).
    """
    if query.max_answer_bytes is not None:
        from tracer._answers import source_answer_limit

        source_answer_limit(query.max_answer_bytes)
    token = ANSWER_LIMIT.set(query.max_answer_bytes)
    try:
        yield
    finally:
        ANSWER_LIMIT.reset(token)


def gather(
    source: Source,
    query: Query,
    *,
    trace_ids: Collection[str] | None = None,
    listener: Listener = QUIET,
) -> TraceSet:
    """Load ``source`` whole and keep the traces ``query`` selects (only ``trace_ids``
    when given; the newest ``query.limit``).

    Raises:
        SourceError: as the source's kind raises.
    """
    ids = None if trace_ids is None else trace_ids_of(trace_ids)
    traceset = TraceSet()
    with gc_paused():
        source.load(traceset, query, ids, listener)
        traceset.attach_events()
        traceset = traceset.keep(query.keep)
        if ids is not None:
            traceset = traceset.subset(ids)
        limit = query.limit
        if limit is not None and len(traceset.traces) > limit:
            newest = sorted(
                traceset.traces.items(),
                key=lambda kv: min(s.start_ns for s in kv[1]),
                reverse=True,
            )[:limit]
            traceset.traces = dict(newest)
    return traceset
