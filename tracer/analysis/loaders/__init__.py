"""Loaders: turn any trace source into a :class:`TraceSet` (sources: README, Analyze).

A source is a span store file, an OTLP JSON, Jaeger JSON or Tempo JSON file, a folder
of them, or a Jaeger or Grafana Tempo query URL (docs/sources.md). The format of a
file is told from its content; what a URL is, by asking it.
"""

from __future__ import annotations

import io
import re
import sys
import time
from collections.abc import Collection, Sequence
from pathlib import Path

from tracer._errors import ConfigError, SourceError
from tracer._sources import is_url
from tracer.analysis.execution.parallel import gc_paused
from tracer.analysis.loaders._http import ANSWER_LIMIT, QUIET, Listener, trace_ids_of
from tracer.analysis.loaders.files import load_file, load_stream
from tracer.analysis.loaders.store import load_store
from tracer.analysis.loaders.url import load_url
from tracer.analysis.traceset import TraceFilter, TraceSet

__all__ = ["load", "parse_duration"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}
_TRACE_SUFFIXES = (".json", ".jsonl", ".ndjson", ".db", ".sqlite")


def parse_duration(text: str) -> float:
    """Seconds in ``"90s"``, ``"15m"``, ``"2h"``, ``"1d"`` (a bare number is seconds).

    Raises:
        ConfigError: not a duration.
    """
    match = _DURATION.match(str(text))
    if not match:
        raise ConfigError(f"duration must look like 30s, 15m, 2h or 1d, got {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]


def _is_store(path: Path) -> bool:
    from collector.store import is_store_file

    return is_store_file(path)


def load(
    sources: Sequence[str | Path],
    *,
    service: str | None = None,
    operation: str | None = None,
    limit: int | None = None,
    since: str | None = None,
    run: str | None = None,
    backend: str = "auto",
    query: str | None = None,
    trace_ids: Collection[str] | None = None,
    listener: Listener = QUIET,
    max_answer_bytes: int | str | None = None,
) -> TraceSet:
    """Load every source into one :class:`TraceSet`.

    Args:
        sources: files, folders, store files, Jaeger or Tempo URLs, ``-`` for standard
            input; the default store when empty.
        service: keep the traces that contain a span of this service.
        operation: keep the traces that contain a span of this operation.
        limit: keep the most recent N traces.
        since: keep the traces that started within this duration (``15m``, ``2h``).
        run: keep the traces with a span whose ``hoptrace.run`` matches this glob.
        backend: what a URL is: ``auto`` (ask it), ``jaeger`` or ``tempo``.
        query: TraceQL for a Tempo URL's search, instead of the one made of
            ``service`` and ``operation`` (which still select among the traces found).
        trace_ids: only these traces; a URL is asked for them by id, not searched.
        listener: told which backend a URL is and how fetching many traces goes.
        max_answer_bytes: the largest answer read from a Jaeger or Tempo URL, after
            decompression (bytes or a size such as ``"64MiB"``); None reads
            ``$HOPTRACE_MAX_ANSWER_BYTES``, else 256 MiB. A search answer past it is a
            SourceError; a trace past it is skipped and counted.

    Raises:
        SourceError: a source that does not exist, cannot be opened, or a backend
            that does not answer or refuses the search.
        ConfigError: a bad ``since``, ``limit`` or ``backend``, or a ``query``
            without a Tempo URL.
    """
    if max_answer_bytes is not None:
        from tracer._answers import source_answer_limit

        source_answer_limit(max_answer_bytes)  # a bad size fails before anything is read
    token = ANSWER_LIMIT.set(max_answer_bytes)
    try:
        with gc_paused():
            return _load(
                sources, service, operation, limit, since, run, backend, query, trace_ids, listener
            )
    finally:
        ANSWER_LIMIT.reset(token)


def _load(
    sources: Sequence[str | Path],
    service: str | None,
    operation: str | None,
    limit: int | None,
    since: str | None,
    run: str | None,
    backend: str = "auto",
    query: str | None = None,
    trace_ids: Collection[str] | None = None,
    listener: Listener = QUIET,
) -> TraceSet:
    if limit is not None and limit <= 0:
        raise ConfigError(f"limit must be a positive number of traces, got {limit!r}")
    lookback_s = parse_duration(since) if since else None
    since_ns = time.time_ns() - int(lookback_s * 1e9) if lookback_s is not None else None
    if not sources:
        from collector.store import default_store_path

        sources = [default_store_path()]
        if not Path(sources[0]).exists():
            raise SourceError(
                f"no traces yet: the default store {str(sources[0])!r} does not exist; "
                "'hoptrace demo' or 'hoptrace serve' fills it, 'hoptrace collect' receives "
                "your own services' spans into it, or give a trace file, store or URL"
            )
    if query and not any(is_url(str(s)) for s in sources):
        raise ConfigError("--query is TraceQL for a Grafana Tempo URL; no source here is a URL")
    ids = None if trace_ids is None else trace_ids_of(trace_ids)
    traceset = TraceSet()
    for source in sources:
        text = str(source)
        if is_url(text):
            load_url(
                text,
                traceset,
                backend=backend,
                service=service,
                operation=operation,
                query=query,
                lookback_s=lookback_s if lookback_s is not None else 3600.0,
                limit=limit,
                trace_ids=ids,
                listener=listener,
            )
            continue
        if text == "-":
            load_stream(sys.stdin.buffer, traceset, "standard input")
            continue
        path = Path(text).expanduser()
        if path.is_dir():
            files = sorted(
                p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in _TRACE_SUFFIXES
            )
            if not files:
                raise SourceError(f"folder {text!r} holds no .json, .jsonl or .db trace files")
            for f in files:
                try:
                    _load_path(f, traceset, since_ns)
                except SourceError as exc:  # one unreadable file does not stop the folder
                    traceset.warnings.skip(f"{f}: skipped: {exc}", 0)
        elif path.exists():
            _load_path(path, traceset, since_ns)
        else:
            raise SourceError(
                f"trace source {text!r} does not exist; give a trace file, a folder, a span "
                "store, or a Jaeger or Tempo URL such as http://localhost:16686"
            )
    traceset.attach_events()
    traceset = traceset.keep(TraceFilter(service, operation, run, since_ns))
    if ids is not None:
        traceset = traceset.subset(ids)
    if limit is not None and len(traceset.traces) > limit:
        newest = sorted(
            traceset.traces.items(), key=lambda kv: min(s.start_ns for s in kv[1]), reverse=True
        )[:limit]
        traceset.traces = dict(newest)
    return traceset


def _load_path(path: Path, traceset: TraceSet, since_ns: int | None) -> None:
    if not path.is_file():
        # A pipe (``<(cat f)``, /dev/stdin): it can be read once only.
        from collector.store import STORE_HEADER

        data = path.read_bytes()
        if data.startswith(STORE_HEADER):
            raise SourceError(f"{str(path)!r} is a span store: give its path, not a pipe")
        load_stream(io.BytesIO(data), traceset, str(path))
    elif _is_store(path):
        load_store(path, traceset, since_ns)
    else:
        load_file(path, traceset)
