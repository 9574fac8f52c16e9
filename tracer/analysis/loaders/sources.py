"""Every kind of trace source behind one interface, :class:`Source`, picked in one place.

:func:`open_source` looks at what the user gave (``-``, a URL, a folder, a pipe, a
span store, a file) and returns one :class:`Source` for all of it; the loader
(:func:`~tracer.analysis.load`), the analysis (:func:`~tracer.analysis.analyze_sources`)
and the exemplar traces of a report (:func:`~tracer.analysis.exemplar_traces`) all
start there. Each kind recognises itself (:meth:`Source.recognise`, tried in the order
of :data:`KINDS`) and can:

- ``load``: add its spans to a :class:`TraceSet` (the loaders of this package);
- ``stream``: analyse itself without keeping its spans, when it can (OTLP JSON-lines
  files and the span store on every core or on Dask, a Grafana Tempo URL on Dask;
  ``tracer/analysis/execution/``), or say it cannot (None: it is loaded instead);
- ``reread``: the spans of a few traces again, after a stream (a report's exemplars).

A file's kind is told from its content, never its name; what a URL is, by asking it
(or ``--backend``), once, when it is opened.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from tracer._errors import ConfigError, SourceError
from tracer._sources import is_url, shown
from tracer.analysis.execution.parallel import gc_paused
from tracer.analysis.loaders._http import ANSWER_LIMIT, QUIET, Listener, trace_ids_of
from tracer.analysis.loaders.files import is_otlp_lines, load_file, load_stream
from tracer.analysis.loaders.store import load_store
from tracer.analysis.loaders.url import load_url, resolve_backend
from tracer.analysis.query import Query
from tracer.analysis.traceset import TraceSet

if TYPE_CHECKING:
    from tracer.analysis.aggregate import Analysis

__all__ = [
    "KINDS",
    "Folder",
    "JaegerQuery",
    "OtlpLines",
    "Pipe",
    "Several",
    "Source",
    "SpanStoreFile",
    "Stdin",
    "TempoQuery",
    "TraceBackend",
    "TraceFile",
    "gather",
    "open_source",
    "reading",
]

#: ``progress(phase, done, total)``, as :data:`tracer.analysis.execution.pipeline.Progress`.
Progress = Callable[[str, int, int], None]
#: Where a streamed trace was: trace id -> (``seq``, ``last_end``) of its table row.
Places = dict[str, tuple[int, int]]

_TRACE_SUFFIXES = (".json", ".jsonl", ".ndjson", ".db", ".sqlite")


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


class _Loaded:
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


class Stdin(_Loaded):
    """``-``: trace JSON on standard input (read once)."""

    label = "standard input"

    @staticmethod
    def recognise(text: str) -> bool:
        return text == "-"

    @classmethod
    def open(cls, text: str, query: Query, hear: Listener) -> Source:
        return cls()

    def load(self, into: TraceSet, query: Query, ids: list[str] | None, hear: Listener) -> None:
        load_stream(sys.stdin.buffer, into, self.label)

    def reread(self, places: Places, query: Query) -> TraceSet:
        raise SourceError("standard input cannot be read again for the exemplar traces")


class TraceBackend:
    """An http(s) URL: asked (unless ``--backend`` says) whether it is Jaeger or Tempo."""

    @staticmethod
    def recognise(text: str) -> bool:
        return is_url(text)

    @classmethod
    def open(cls, text: str, query: Query, hear: Listener) -> Source:
        kind = resolve_backend(text, query.backend, hear)
        return TempoQuery(text) if kind == "tempo" else JaegerQuery(text)


class _Backend(_Loaded):
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


class JaegerQuery(_Backend):
    """Jaeger's query API (``http://host:16686``): searched and read in this process."""

    kind = "jaeger"


class TempoQuery(_Backend):
    """Grafana Tempo's query API (``http://host:3200``); on Dask, searched here and
    fetched and attributed on the workers."""

    kind = "tempo"

    def stream(self, query: Query, progress: Progress | None, hear: Listener) -> Analysis | None:
        if query.engine != "dask" or query.keep_traces:
            return None
        from tracer.analysis.execution import dask_engine

        return dask_engine.analyze_tempo(self.url, query, progress)


class Folder(_Loaded):
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


class Pipe(_Loaded):
    """A path that is not a regular file (``<(cat f)``, ``/dev/stdin``): read once."""

    def __init__(self, path: Path) -> None:
        self.path, self.label = path, str(path)

    @staticmethod
    def recognise(text: str) -> bool:
        path = Path(text).expanduser()
        return path.exists() and not path.is_file()

    @classmethod
    def open(cls, text: str, query: Query, hear: Listener) -> Source:
        return cls(Path(text).expanduser())

    def load(self, into: TraceSet, query: Query, ids: list[str] | None, hear: Listener) -> None:
        from collector.store import STORE_HEADER

        data = self.path.read_bytes()
        if data.startswith(STORE_HEADER):
            raise SourceError(f"{self.label!r} is a span store: give its path, not a pipe")
        load_stream(io.BytesIO(data), into, self.label)

    def reread(self, places: Places, query: Query) -> TraceSet:
        raise SourceError(f"{self.label!r} is a pipe: it cannot be read again")


class SpanStoreFile:
    """The SQLite span store of ``hoptrace collect``: streamed in trace-id order (one
    process, or trace-id ranges on Dask); traces read again by id."""

    def __init__(self, path: Path) -> None:
        self.path, self.label = path, str(path)

    @staticmethod
    def recognise(text: str) -> bool:
        from collector.store import is_store_file

        path = Path(text).expanduser()
        return path.is_file() and is_store_file(path)

    @classmethod
    def open(cls, text: str, query: Query, hear: Listener) -> Source:
        return cls(Path(text).expanduser())

    def load(self, into: TraceSet, query: Query, ids: list[str] | None, hear: Listener) -> None:
        load_store(self.path, into, query.since_ns)

    def stream(self, query: Query, progress: Progress | None, hear: Listener) -> Analysis | None:
        from tracer.analysis.execution.parallel import workers as worker_count

        if not query.streams:
            return None
        worker_count(query.workers)  # a bad setting is an error on every path
        if query.engine == "dask":
            from tracer.analysis.execution import dask_engine

            return dask_engine.analyze_store(self.path, query, progress)
        from tracer.analysis.execution.bigfile import analyze_store

        return analyze_store(self.path, query)

    def reread(self, places: Places, query: Query) -> TraceSet:
        from collector.store import SpanStore

        found = TraceSet()
        with SpanStore(str(self.path), read_only=True) as store:
            found.add(store.spans_of(places))
        return found


class OtlpLines:
    """OTLP JSON-lines files (what a Collector's file exporter writes), read as one
    input in order: streamed in bounded memory, on every core for 64 MB or more, or as
    Dask tasks; a trace is read again from the lines it was on."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = list(paths)
        self.label = ", ".join(map(str, self.paths))

    @staticmethod
    def recognise(text: str) -> bool:
        path = Path(text).expanduser()
        return path.is_file() and is_otlp_lines(path)

    @classmethod
    def open(cls, text: str, query: Query, hear: Listener) -> Source:
        return cls([Path(text).expanduser()])

    def load(self, into: TraceSet, query: Query, ids: list[str] | None, hear: Listener) -> None:
        for path in self.paths:
            load_file(path, into)

    def stream(self, query: Query, progress: Progress | None, hear: Listener) -> Analysis | None:
        from tracer.analysis.execution.bigfile import analyze_files, eligible
        from tracer.analysis.execution.parallel import workers as worker_count

        if not query.streams:
            return None
        if query.engine == "dask":
            from tracer.analysis.execution import dask_engine

            return dask_engine.analyze_files(self.paths, query, progress)
        count = worker_count(query.workers)
        if count > 1 and not eligible(self.paths):
            count = 1  # small: forking costs more than it saves
        return analyze_files(self.paths, query.but(workers=count), progress)

    def reread(self, places: Places, query: Query) -> TraceSet:
        from tracer.analysis.execution.stream import read_traces

        try:
            return read_traces([str(p) for p in self.paths], places)
        except OSError as exc:
            raise SourceError(
                f"cannot read {exc.filename!r} again for the exemplar traces: {exc.strerror}"
            ) from None


class TraceFile(_Loaded):
    """Any other file: one JSON document (OTLP, Jaeger v1 or api/v3, a Tempo trace),
    or lines that are not OTLP; told from its content as it is loaded."""

    def __init__(self, path: Path) -> None:
        self.path, self.label = path, str(path)

    @staticmethod
    def recognise(text: str) -> bool:
        return Path(text).expanduser().is_file()

    @classmethod
    def open(cls, text: str, query: Query, hear: Listener) -> Source:
        return cls(Path(text).expanduser())

    def load(self, into: TraceSet, query: Query, ids: list[str] | None, hear: Listener) -> None:
        load_file(self.path, into)


class Several(_Loaded):
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
