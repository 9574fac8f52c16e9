"""The kinds of trace source on this machine, as
:class:`~tracer.analysis.loaders.source.Source` kinds: OTLP JSON-lines files, any
other trace file, the span store, standard input and pipes. Each is told from its
content, never its name; loading, streaming and reading again wrap the loaders of this
package and the streamed paths of ``tracer/analysis/execution/``."""

from __future__ import annotations

import io
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tracer._errors import SourceError
from tracer.analysis.loaders._http import Listener
from tracer.analysis.loaders.files import is_otlp_lines, load_file, load_stream
from tracer.analysis.loaders.source import LoadedWhole, Places, Progress, Source
from tracer.analysis.loaders.store import load_store
from tracer.analysis.model.traceset import TraceSet
from tracer.analysis.query import Query

if TYPE_CHECKING:
    from tracer.analysis.aggregate import Analysis

__all__ = ["OtlpLines", "Pipe", "SpanStoreFile", "Stdin", "TraceFile"]


class Stdin(LoadedWhole):
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


class Pipe(LoadedWhole):
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


class TraceFile(LoadedWhole):
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
