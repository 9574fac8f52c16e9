"""``--engine dask``: OTLP JSON-lines files and the span store analysed on a Dask cluster.

The local engine's partition-and-merge design (:mod:`tracer.analysis.execution.bigfile`), with
Dask tasks for partitions:

- **Files** are cut into byte ranges on line boundaries (about
  :data:`PARTITION_BYTES` each, and at least one per worker thread); one task per
  range streams it into a :class:`~tracer.analysis.table._table.TraceTable` (about 350
  bytes a trace, pickled) and returns it with its loader warnings and bad-line counts.
  The client merges them in input order. The traces with more than one part (they
  straddle ranges, or straggled past the window) are shuffled by trace id: grouped
  into tasks by a hash of the id, each task reads again the lines of its traces' parts
  and attributes them whole, and returns a small table. The client merges those and
  aggregates. Every worker must read the files at the paths the client was given.
- **A Grafana Tempo URL** is searched once, by the client, exactly as the local
  engine searches it (so the same traces are read); the trace ids found are cut into
  tasks of about :data:`FETCH_PER_TASK`, and each task fetches its traces by id
  (:data:`~tracer.analysis.loaders._http.FETCH_CONCURRENCY` at a time, as the local
  loader does) and attributes them on its worker: fetching, decoding and attribution
  run on every worker at once. The traces that could not be read are counted as one
  loader would. (A Jaeger search answers with the traces themselves, so a Jaeger URL
  is read in the client; cutting its search into time windows would read other traces
  than the local engine's ``--limit`` does.)
- **The span store** is cut into trace-id ranges (``lo <= trace_id < hi``, cut where a
  sample of rows spread over the store falls); one task streams each range. A trace
  id falls in one range, so nothing straddles.

Without a scheduler address a :class:`distributed.LocalCluster` of worker processes
(one thread each) runs for the call and is closed after it. Dask is an optional extra:
``pip install 'hoptrace[dask]'``; this module imports it only when called.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tracer._errors import ConfigError, HoptraceError, SourceError
from tracer.analysis.aggregate import Analysis, aggregate_table
from tracer.analysis.execution.bigfile import (
    Range,
    _partition,
    _ranges,
    attributor,
    merge_partitions,
    store_bounds,
)
from tracer.analysis.execution.parallel import workers as worker_count
from tracer.analysis.execution.stream import (
    LineTally,
    attribute_parts,
    stream_store,
    window_spans,
)
from tracer.analysis.loaders._http import Fetched
from tracer.analysis.model.traceset import TraceSet
from tracer.analysis.query import Query
from tracer.analysis.table._memory import gc_paused
from tracer.analysis.table._table import TraceTable
from tracer.spans.model import Warnings

__all__ = [
    "DASK_MISSING",
    "FETCH_PER_TASK",
    "PARTITION_BYTES",
    "analyze_files",
    "analyze_store",
    "analyze_tempo",
    "connect",
]

#: Bytes of a file partition (more partitions than workers keeps every worker busy).
PARTITION_BYTES = 64 * 1024 * 1024
#: Traces one task fetches from Tempo by id.
FETCH_PER_TASK = 250
#: Store partitions per worker thread.
STORE_PARTS_PER_WORKER = 4

DASK_MISSING = "--engine dask needs Dask, which is not installed: pip install 'hoptrace[dask]'"

#: ``progress(phase, done, total)``, as :data:`tracer.analysis.execution.pipeline.Progress`.
Progress = Callable[[str, int, int], None]


@contextlib.contextmanager
def connect(scheduler: str | None = None, workers: int | None = None) -> Iterator[Any]:
    """A :class:`distributed.Client` of the scheduler at ``scheduler``, or of a local
    cluster of ``workers`` processes (else ``HOPTRACE_WORKERS``, else one per CPU)
    that is closed on exit.

    Raises:
        ConfigError: Dask is not installed, the scheduler cannot be reached, or a bad
            worker count.
    """
    try:
        import distributed
    except ImportError:
        raise ConfigError(DASK_MISSING) from None
    with _quiet_logs():
        if scheduler is None:
            count = worker_count(workers)
            with warnings.catch_warnings():
                # Its HTTP server (health checks) moves off a busy port 8787: no news.
                warnings.filterwarnings("ignore", "Port .* is already in use", UserWarning)
                cluster = distributed.LocalCluster(
                    n_workers=count,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    silence_logs=logging.ERROR,
                )
            try:
                with distributed.Client(cluster) as client:
                    yield client
            finally:
                cluster.close()
            return
        try:
            client = distributed.Client(scheduler)
        except (OSError, TimeoutError, ValueError, TypeError) as exc:
            raise ConfigError(
                f"cannot reach the Dask scheduler at {scheduler!r} ({_one_line(exc)}); "
                "check --scheduler (tcp://HOST:PORT)"
            ) from None
        with client:
            yield client


@contextlib.contextmanager
def _quiet_logs() -> Iterator[None]:
    """Dask's own INFO and WARNING lines (connections closing at shutdown) off stderr."""
    logger = logging.getLogger("distributed")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _threads(client: Any) -> int:
    return max(1, sum(client.nthreads().values()))


def _gather(
    client: Any,
    futures: list[Any],
    sizes: list[int],
    progress: Progress | None,
    phase: str = "reading",
) -> list:
    """The futures' results in order, telling ``progress(phase, done, total)`` the sum
    of the finished futures' ``sizes`` as they finish.

    Raises:
        HoptraceError: a task failed (its error, in one line).
    """
    from distributed import as_completed

    total = sum(sizes)
    try:
        if progress is not None:
            size_of = {f.key: s for f, s in zip(futures, sizes, strict=True)}
            done = 0
            progress(phase, 0, total)
            for future in as_completed(futures):
                done += size_of[future.key]
                progress(phase, done, total)
        return list(client.gather(futures))
    except HoptraceError:
        raise
    except Exception as exc:  # noqa: BLE001 - a worker died or a task failed: one line
        raise HoptraceError(f"a Dask task failed: {type(exc).__name__}: {_one_line(exc)}") from None


def _read_files(
    ranges: list[Range], query: Query, window: int
) -> tuple[TraceTable, list[tuple[int, Warnings, LineTally]]]:
    """A task: stream ``ranges`` into a fresh table (on a worker), as ``query`` asks
    (its filters' instant was fixed in the client)."""
    try:
        with gc_paused():
            return _partition(ranges, attributor(query), window, None)
    except OSError as exc:
        raise SourceError(_unreadable(exc)) from None


def _join(parts: dict[str, list[tuple[int, int]]], names: list[str], query: Query) -> TraceTable:
    """A task: read again the parts of these traces and attribute each whole."""
    attribute = attributor(query)
    try:
        with gc_paused():
            attribute_parts(parts, names, attribute)
    except OSError as exc:
        raise SourceError(_unreadable(exc)) from None
    return attribute.table


def _read_store(
    path: str, bounds: tuple[str | None, str | None], query: Query
) -> tuple[TraceTable, Warnings]:
    """A task: stream the traces of the store with ids in ``bounds`` (on a worker)."""
    if not Path(path).is_file():
        raise SourceError(f"a Dask worker cannot read the span store {path!r}: {_SAME_PATH}")
    attribute = attributor(query)
    loaded = Warnings()
    with gc_paused():
        stream_store(path, query.since_ns, attribute, loaded, bounds, query.run)
    return attribute.table, loaded


_SAME_PATH = "every worker must read the sources at the same path as the client"


def _unreadable(exc: OSError) -> str:
    return f"a Dask worker cannot read {exc.filename!r} ({exc.strerror or exc}): {_SAME_PATH}"


def _shuffle(parts: dict[str, list[tuple[int, int]]], tasks: int) -> list[dict]:
    """The traces' parts grouped into ``tasks`` groups by a stable hash of the id."""
    groups: list[dict[str, list[tuple[int, int]]]] = [{} for _ in range(max(1, tasks))]
    for trace_id, pieces in parts.items():
        groups[zlib.crc32(trace_id.encode()) % len(groups)][trace_id] = pieces
    return [g for g in groups if g]


def analyze_files(
    paths: Sequence[Path],
    query: Query,
    progress: Progress | None = None,
    *,
    partition_bytes: int = PARTITION_BYTES,
) -> Analysis:
    """Attribute the OTLP JSON-lines files ``paths`` on Dask as ``query`` asks (sent
    to the workers, what-if included); see the module docstring. The scheduler is
    ``query.scheduler``, else a local cluster of ``query.workers`` processes.

    ``progress`` hears ``("reading", bytes done, bytes)`` as partitions finish, then
    ``("joining", n, n)`` with the number of traces that had several parts.

    Raises:
        ConfigError: no Dask, an unreachable scheduler, or a bad window.
        SourceError: a worker cannot read a file.
        NoUsableDataError: no trace could be analysed.
        HoptraceError: a task failed.
    """
    if partition_bytes < 1:
        raise ConfigError(f"partition_bytes must be positive, got {partition_bytes!r}")
    size = window_spans(query.window_spans)
    names = [str(p) for p in paths]
    total = sum(p.stat().st_size for p in paths)
    with connect(query.scheduler, query.workers) as client:
        threads = _threads(client)
        plan = _ranges(paths, max(threads, -(-total // partition_bytes)))
        futures = client.map(_read_files, plan, query=query, window=size, pure=False)
        sizes = [sum(hi - lo for _, _, lo, hi in ranges) for ranges in plan]
        with gc_paused():
            table, loaded = merge_partitions(plan, _gather(client, futures, sizes, progress), names)
            parts = table.repeated()
            if progress is not None:
                progress("joining", len(parts), len(parts))
            if parts:
                table.drop(set(parts))
                groups = _shuffle(parts, threads)
                joins = client.map(_join, groups, names=names, query=query, pure=False)
                for joined in _gather(client, joins, [len(g) for g in groups], None):
                    table.merge(joined)
    return aggregate_table(table, query.group_by, loaded, table.tally(), query.exact_traces)


def analyze_store(path: Path, query: Query, progress: Progress | None = None) -> Analysis:
    """Attribute the span store at ``path`` on Dask as ``query`` asks, one task per
    trace-id range; ``progress`` hears ``("attributing", ranges done, ranges)``.

    Raises:
        ConfigError: no Dask or an unreachable scheduler.
        SourceError: a worker cannot read the store.
        NoUsableDataError: no trace could be analysed.
    """
    with connect(query.scheduler, query.workers) as client:
        bounds = store_bounds(path, _threads(client) * STORE_PARTS_PER_WORKER)
        futures = client.map(
            _read_store, [str(path)] * len(bounds), bounds, query=query, pure=False
        )
        results = _gather(client, futures, [1] * len(bounds), progress, "attributing")
    table, loaded = TraceTable(), Warnings()
    with gc_paused():
        for part, warnings in results:  # in trace-id order, as one reader would go
            table.merge(part)
            loaded.merge(warnings)
        return aggregate_table(table, query.group_by, loaded, table.tally(), query.exact_traces)


def _read_tempo(
    url: str, ids: list[str], first_seq: int, query: Query, headers: dict[str, str]
) -> tuple[TraceTable, Warnings, list[Fetched]]:
    """A task: fetch these traces from Tempo by id and attribute them (on a worker); the
    ones that could not be read are returned for the client to count."""
    from tracer.analysis.loaders.tempo import fetch_tempo

    found = TraceSet()
    problems = fetch_tempo(url, found, ids, headers=headers)
    attribute = attributor(query)
    place = {tid: first_seq + n for n, tid in enumerate(ids)}  # the search's order
    with gc_paused():
        for trace_id in sorted(found.traces, key=place.__getitem__):
            attribute(trace_id, found.traces[trace_id], place[trace_id], 0)
    return attribute.table, found.warnings, problems


def analyze_tempo(
    url: str,
    query: Query,
    progress: Progress | None = None,
    *,
    per_task: int = FETCH_PER_TASK,
) -> Analysis:
    """Search the Tempo at ``url`` here and fetch and attribute the traces found on Dask
    (see the module docstring); the search is ``query``'s, as
    :func:`~tracer.analysis.loaders.tempo.load_tempo` makes it (TraceQL, service and
    operation, since, limit), the rest as in :func:`analyze_files`. ``progress`` hears
    ``("fetching", traces done, traces)``.

    Raises:
        ConfigError: no Dask or an unreachable scheduler.
        SourceError: Tempo does not answer, or refuses the search.
        NoUsableDataError: no trace could be analysed.
        HoptraceError: a task failed.
    """
    from tracer.analysis.loaders._http import backend_access, note_problems
    from tracer.analysis.loaders.tempo import search_tempo

    # Credentials and HOPTRACE_BACKEND_HEADERS are read here and sent to the tasks.
    url, headers = backend_access(url)
    loaded = TraceSet()
    ids = search_tempo(
        url,
        loaded.warnings,
        service=query.service,
        operation=query.operation,
        query=query.traceql,
        lookback_s=query.lookback_s,
        limit=query.limit,
        headers=headers,
    )
    table = TraceTable()
    problems: list[Fetched] = []
    if ids:
        with connect(query.scheduler, query.workers) as client:
            tasks = max(_threads(client), -(-len(ids) // max(1, per_task)))
            step = -(-len(ids) // tasks)
            chunks = [ids[i : i + step] for i in range(0, len(ids), step)]
            starts = list(range(0, len(ids), step))
            futures = client.map(
                _read_tempo,
                [url] * len(chunks),
                chunks,
                starts,
                query=query,
                headers=headers,
                pure=False,
            )
            results = _gather(client, futures, [len(c) for c in chunks], progress, "fetching")
        with gc_paused():
            for part, warnings, bad in results:  # in the search's order
                table.merge(part)
                loaded.warnings.merge(warnings)
                problems.extend(bad)
    note_problems(loaded, problems, f"Tempo at {url.rstrip('/')}", len(ids))
    return aggregate_table(
        table, query.group_by, loaded.warnings, table.tally(), query.exact_traces
    )
