"""``analyze`` of OTLP JSON-lines files in bounded memory, on one core or every core.

One partition-and-merge design serves both: the files are cut into byte ranges on
line boundaries (one range per file for one process; the bytes spread evenly over
the workers otherwise). Each partition is streamed (:mod:`tracer.analysis.execution.stream`)
into a compact :class:`~tracer.analysis.table._table.TraceTable`; the tables are merged in
input order; the traces that straddle partitions (or straggled past the window) are
found by id, read again and attributed whole; then the rows are aggregated. The
result is the serial in-memory path's (tested with every trace split across ranges);
rows are sorted by start time and trace id before aggregation, so neither input
order nor the number of workers matters.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from tracer._errors import HoptraceError
from tracer.analysis.aggregate import Analysis, aggregate_table
from tracer.analysis.execution.parallel import workers as worker_count
from tracer.analysis.execution.stream import (
    Attributor,
    LineTally,
    join_parts,
    stream_range,
    stream_store,
    window_spans,
)
from tracer.analysis.loaders.files import is_otlp_lines
from tracer.analysis.query import Query
from tracer.analysis.table._memory import gc_paused, trim_freed_memory
from tracer.analysis.table._table import TraceTable
from tracer.analysis.table._transfer import receive_table, send_table
from tracer.spans.model import Warnings

__all__ = [
    "MIN_BYTES",
    "analyze_files",
    "analyze_store",
    "attributor",
    "eligible",
    "merge_partitions",
    "store_bounds",
]

MIN_BYTES = 64 * 1024 * 1024  # below this, forking costs more than it saves

#: One partition: (file index, path, first byte, end byte).
Range = tuple[int, str, int, int]


def _min_bytes() -> int:
    setting = os.environ.get("HOPTRACE_PARALLEL_MIN_BYTES", "").strip()
    return int(setting) if setting.isdecimal() else MIN_BYTES


def eligible(paths: Sequence[Path], min_bytes: int | None = None) -> bool:
    """True when the paths are all OTLP JSON-lines files of ``min_bytes`` or more
    together (default ``HOPTRACE_PARALLEL_MIN_BYTES``, 64 MB; 0 for any size)."""
    floor = _min_bytes() if min_bytes is None else min_bytes
    try:
        if sum(p.stat().st_size for p in paths if p.is_file()) < max(floor, 1):
            return False
    except OSError:
        return False
    # Told by the content, as the loaders do: any name.
    return all(p.is_file() and is_otlp_lines(p) for p in paths)


def attributor(query: Query) -> Attributor:
    """An :class:`Attributor` for what ``query`` asks: its grouping, stage map,
    filters, split and what-if."""
    return Attributor(
        query.group_by,
        query.stage_map,
        query.keep,
        split_by=query.split_by,
        projection=query.projection,
    )


def _ranges(paths: Sequence[Path], workers: int) -> list[list[Range]]:
    """Byte ranges, cut after a newline, spread evenly over ``workers``."""
    sizes = [p.stat().st_size for p in paths]
    per = max(1, -(-sum(sizes) // workers))
    plan: list[list[Range]] = [[] for _ in range(workers)]
    w = used = 0
    for index, (path, size) in enumerate(zip(paths, sizes, strict=True)):
        lo = 0
        with open(path, "rb") as fh:
            while lo < size:
                hi = min(size, lo + per - used)
                if hi < size:
                    fh.seek(hi)
                    fh.readline()
                    hi = min(size, fh.tell())
                plan[min(w, workers - 1)].append((index, str(path), lo, hi))
                used += hi - lo
                lo = hi
                if used >= per:
                    w, used = w + 1, 0
    return [p for p in plan if p]


def _partition(
    ranges: list[Range],
    attribute: Attributor,
    window: int,
    progress: Callable[[int], None] | None,
) -> tuple[TraceTable, list[tuple[int, Warnings, LineTally]]]:
    """Stream ``ranges``: the table, and each range's loader warnings and bad lines."""
    loaded = []
    for index, path, lo, hi in ranges:
        warnings, lines = Warnings(), LineTally()
        stream_range(path, index, lo, hi, attribute, window, warnings, lines, progress)
        loaded.append((index, warnings, lines))
    return attribute.table, loaded


def _worker(conn: Any, ranges: list[Range], attribute: Attributor, window: int, read: Any) -> None:
    def progress(n: int) -> None:
        with read.get_lock():
            read.value += n

    try:
        with gc_paused():
            table, loaded = _partition(ranges, attribute, window, progress)
            trim_freed_memory(now=True)  # the window's freed spans, before the table crosses
            send_table(conn, table, "ok", loaded)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as one line
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()
    # Everything was sent: skip freeing the worker's objects one by one at exit.
    os._exit(0)


def analyze_files(
    paths: Sequence[Path],
    query: Query,
    progress: Callable[[str, int, int], None] | None = None,
) -> Analysis:
    """Stream and attribute ``paths`` on ``query.workers`` processes (else
    ``HOPTRACE_WORKERS``, else one per CPU); see the module docstring.

    The query's filters keep whole traces, as in :func:`~tracer.analysis.load`;
    ``query.window_spans`` is the streaming window
    (:func:`~tracer.analysis.execution.stream.window_spans`); the split, what-if and
    exact limit are as in :func:`~tracer.analysis.analyze`.
    ``progress(phase, done, total)`` is called about ten times a second while reading
    (bytes), then once when joining and aggregating.

    Raises:
        NoUsableDataError: no trace could be analysed.
        HoptraceError: a worker failed.
        ConfigError: a bad window or worker count.
    """
    attribute = attributor(query)
    size = window_spans(query.window_spans)
    workers = worker_count(query.workers)
    names = [str(p) for p in paths]
    if workers < 2:
        plan = [[(i, name, 0, Path(name).stat().st_size) for i, name in enumerate(names)]]
    else:
        plan = _ranges(paths, workers)
    total = sum(hi - lo for ranges in plan for _, _, lo, hi in ranges)
    with gc_paused():
        if len(plan) == 1:
            done = [0]

            def tick(n: int) -> None:
                done[0] += n
                if progress is not None:
                    progress("reading", done[0], total)

            parts = [_partition(plan[0], attribute, size, tick)]
        else:
            parts = _fork(plan, attribute, size, total, progress)
        if progress is not None:
            progress("attributing", 0, 0)
        table, loaded = merge_partitions(plan, parts, names)
        attribute.table = table
        join_parts(table, names, attribute)
        return aggregate_table(table, query.group_by, loaded, table.tally(), query.exact_traces)


def merge_partitions(
    plan: Sequence[Sequence[Range]],
    parts: Sequence[tuple[TraceTable, list[tuple[int, Warnings, LineTally]]]],
    names: Sequence[str],
) -> tuple[TraceTable, Warnings]:
    """The partitions' tables merged in input order (``parts`` in ``plan``'s order), and
    their loader warnings with each file's bad-line counts noted after its last range."""
    table = TraceTable()
    loaded = Warnings()
    lines = [LineTally() for _ in names]
    last_range = {index: n for n, (index, _, _, _) in enumerate(r for p in plan for r in p)}
    n = 0
    for part_table, part_loaded in parts:
        table.merge(part_table)
        for index, warnings, part_lines in part_loaded:
            loaded.merge(warnings)
            lines[index].merge(part_lines)
            if last_range[index] == n:  # the file's last range: its line counts
                lines[index].report(names[index], loaded)
            n += 1
    return table, loaded


def store_bounds(path: Path, parts: int) -> list[tuple[str | None, str | None]]:
    """Trace-id ranges of the store at ``path`` holding about equal numbers of rows,
    covering every id (cut where a sample of rows spread over the store falls)."""
    from collector.store import SpanStore

    if parts < 2:
        return [(None, None)]
    with SpanStore(str(path), read_only=True) as store:
        sample = store.trace_id_sample(parts * 32)
    cuts = sorted({sample[len(sample) * i // parts] for i in range(1, parts)} if sample else ())
    edges: list[str | None] = [None, *cuts, None]
    return list(zip(edges, edges[1:], strict=False))


def analyze_store(path: Path, query: Query) -> Analysis:
    """Attribute the span store at ``path`` trace by trace (in trace-id order, read in
    chunks) as ``query`` asks (see :func:`analyze_files`): a store of half
    ``HOPTRACE_PARALLEL_MIN_BYTES`` or more (a span takes about half the bytes in the
    store it takes in OTLP JSON) cut into a trace-id range per worker
    (``query.workers``, else ``HOPTRACE_WORKERS``, else one per CPU), this process
    reading the first. Each range is read in a snapshot of its own, so every trace is
    read whole; the tables are merged in trace-id order, as one reader would go.

    Raises:
        NoUsableDataError: no trace could be analysed.
        SourceError: not a span store.
        HoptraceError: a worker failed.
    """
    attribute = attributor(query)
    workers = worker_count(query.workers)
    try:
        big = path.stat().st_size >= max(_min_bytes() // 2, 1)
    except OSError:
        big = False
    bounds = store_bounds(path, workers if big else 1)
    loaded = Warnings()
    with gc_paused():
        if len(bounds) == 1:
            stream_store(str(path), query.since_ns, attribute, loaded, bounds[0], query.run)
            table = attribute.table
        else:
            table = _fork_store(str(path), query, bounds, attribute, loaded)
        return aggregate_table(table, query.group_by, loaded, table.tally(), query.exact_traces)


def _store_worker(
    conn: Any, path: str, query: Query, bounds: tuple[str | None, str | None], attribute: Attributor
) -> None:
    try:
        with gc_paused():
            loaded = Warnings()
            stream_store(path, query.since_ns, attribute, loaded, bounds, query.run)
            trim_freed_memory(now=True)
            send_table(conn, attribute.table, "ok", loaded)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as one line
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()
    os._exit(0)


def _fork_store(
    path: str,
    query: Query,
    bounds: list[tuple[str | None, str | None]],
    attribute: Attributor,
    loaded: Warnings,
) -> TraceTable:
    """The store's ranges ``bounds``: this process reads the first, forked workers the
    others (as :func:`_fork` does for files); the tables merged in range order."""
    with _workers(_store_worker, [(path, query, part, attribute) for part in bounds[1:]]) as conns:
        stream_store(path, query.since_ns, attribute, loaded, bounds[0], query.run)
        table = attribute.table
        trim_freed_memory(now=True)
        for conn in conns:
            part_table, part_loaded = _recv(conn)
            table.merge(part_table)
            loaded.merge(part_loaded)
        return table


@contextmanager
def _workers(target: Callable[..., None], jobs: list[tuple[Any, ...]]) -> Iterator[list[Any]]:
    """Forked workers running ``target(pipe, *job)``, one per job, started at once; the
    parent's ends of their pipes, in job order. The workers are joined (and killed
    after 5 s) on the way out."""
    ctx = multiprocessing.get_context("fork")
    conns, procs = [], []
    for job in jobs:
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=target, args=(child, *job))
        proc.daemon = True
        proc.start()
        child.close()
        conns.append(parent)
        procs.append(proc)
    try:
        yield conns
    finally:
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()


def _fork(
    plan: list[list[Range]],
    attribute: Attributor,
    window: int,
    total: int,
    progress: Callable[[str, int, int], None] | None,
) -> list[Any]:
    """The partitions of ``plan``: this process streams the first itself (one fork and
    one table's pickling fewer, and no core left to a process that only waits); the
    others run in forked workers, started first."""
    read = multiprocessing.get_context("fork").Value("q", 0)
    with _workers(_worker, [(ranges, attribute, window, read) for ranges in plan[1:]]) as conns:
        shown = [0.0]

        def tick(n: int) -> None:
            with read.get_lock():
                read.value += n
            now = time.monotonic()
            if progress is not None and now - shown[0] >= 0.1:
                shown[0] = now
                progress("reading", min(read.value, total), total)

        mine = _partition(plan[0], attribute, window, tick)
        trim_freed_memory(now=True)  # as the workers do, before their tables arrive
        if progress is not None:
            waiting = list(conns)
            while waiting:  # woken as soon as a worker's table is ready, not on a tick
                progress("reading", min(read.value, total), total)
                ready = wait(waiting, timeout=0.1)
                waiting = [c for c in waiting if c not in ready]
            progress("reading", total, total)
        return [mine, *(_recv(c) for c in conns)]


def _recv(conn: Any) -> tuple[TraceTable, Any]:
    """A worker's table and its loader warnings (see :mod:`tracer.analysis.table._transfer`)."""
    try:
        message = conn.recv()
        if isinstance(message, tuple) and message and message[0] == "error":
            raise HoptraceError(f"an analysis worker failed: {message[1]}")
        _, loaded, table = receive_table(conn, message)
    except EOFError:
        raise HoptraceError("an analysis worker process died (out of memory?)") from None
    return table, loaded
