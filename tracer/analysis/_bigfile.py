"""``analyze`` of large OTLP JSON-lines files on every core.

The file is cut into byte ranges on line boundaries, one per worker process. Each
worker parses its range and groups the spans by trace; the parent then learns which
trace ids occur in more than one range (a trace whose spans were exported in batches
far apart). Each worker attributes its whole traces and sends back the small
per-trace breakdowns; the spans of split traces come to the parent, which joins and
attributes them. The result is the same as the serial path's (tested).
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from tracer._errors import HoptraceError
from tracer.analysis._parallel import gc_paused
from tracer.analysis.aggregate import Analysis, aggregate, iter_prepared
from tracer.analysis.breakdown import TraceBreakdown, break_down
from tracer.analysis.loaders.files import _load_lines
from tracer.analysis.prepare import StageMap
from tracer.analysis.traceset import TraceFilter, TraceSet
from tracer.spans.model import Warnings

__all__ = ["MIN_BYTES", "analyze_files", "eligible"]

MIN_BYTES = 64 * 1024 * 1024  # below this, forking costs more than it saves


def _min_bytes() -> int:
    setting = os.environ.get("HOPTRACE_PARALLEL_MIN_BYTES", "").strip()
    return int(setting) if setting.isdigit() else MIN_BYTES


_FIELDS = TraceBreakdown.__slots__


def eligible(paths: Sequence[Path]) -> bool:
    """True when the paths are large enough together and all OTLP JSON-lines files."""
    try:
        if sum(p.stat().st_size for p in paths if p.is_file()) < _min_bytes():
            return False
    except OSError:
        return False
    for path in paths:
        if not path.is_file() or path.suffix.lower() not in (".jsonl", ".ndjson", ".json"):
            return False
        try:
            with open(path, "rb") as fh:
                head = fh.read(4)
                fh.seek(0)
                first = fh.readline(64 * 1024 * 1024)
            if head.startswith((b"SQLi", b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf")):
                return False
            obj = orjson.loads(first)
        except (OSError, orjson.JSONDecodeError):
            return False
        if not isinstance(obj, dict) or "resourceSpans" not in obj:
            return False
    return True


def _ranges(paths: Sequence[Path], workers: int) -> list[list[tuple[str, int, int]]]:
    """Byte ranges, cut after a newline, spread evenly over ``workers``."""
    sizes = [p.stat().st_size for p in paths]
    per = -(-sum(sizes) // workers)
    plan: list[list[tuple[str, int, int]]] = [[] for _ in range(workers)]
    w = used = 0
    for path, size in zip(paths, sizes, strict=True):
        lo = 0
        with open(path, "rb") as fh:
            while lo < size:
                want = per - used
                hi = min(size, lo + want)
                if hi < size:
                    fh.seek(hi)
                    fh.readline()
                    hi = min(size, fh.tell())
                plan[min(w, workers - 1)].append((str(path), lo, hi))
                used += hi - lo
                lo = hi
                if used >= per:
                    w, used = w + 1, 0
    return [p for p in plan if p]


def _lines(path: str, lo: int, hi: int) -> Any:
    with open(path, "rb") as fh:
        fh.seek(lo)
        left = hi - lo
        while left > 0:
            line = fh.readline(left)
            if not line:
                return
            left -= len(line)
            yield line


def _attribute(
    traces: dict[str, list[Any]], group_by: str, stage_map: StageMap | None
) -> tuple[list[tuple[Any, ...]], Warnings]:
    tally = Warnings()
    rows = [
        tuple(getattr(b, f) for f in _FIELDS)
        for b in (
            break_down(t, group_by) for t in iter_prepared(TraceSet(traces), tally, stage_map)
        )
    ]
    return rows, tally


def _counted(lines: Any, counter: Any) -> Any:
    """Pass ``lines`` through, adding their bytes to ``counter`` every 256 lines."""
    pending = 0
    for n, line in enumerate(lines, 1):
        pending += len(line)
        if n % 256 == 0:
            with counter.get_lock():
                counter.value += pending
            pending = 0
        yield line
    with counter.get_lock():
        counter.value += pending


def _worker(
    conn: Any,
    ranges: list[tuple[str, int, int]],
    group_by: str,
    stage_map: StageMap | None,
    selection: TraceFilter,
    read_bytes: Any,
) -> None:
    try:
        with gc_paused():
            traceset = TraceSet()
            for path, lo, hi in ranges:
                _load_lines(_counted(_lines(path, lo, hi), read_bytes), traceset, path)
            conn.send(list(traceset.traces))
            split: set[str] = conn.recv()
            whole = {
                t: s for t, s in traceset.traces.items() if t not in split and selection.matches(s)
            }
            rows, tally = _attribute(whole, group_by, stage_map)
            away = {t: traceset.traces[t] for t in split if t in traceset.traces}
            conn.send(("ok", rows, tally, traceset.warnings, away))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as one line
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()
    # Everything was sent: skip freeing half a million objects one by one at exit.
    os._exit(0)


def analyze_files(
    paths: Sequence[Path],
    group_by: str,
    stage_map: StageMap | None,
    workers: int,
    selection: TraceFilter | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> Analysis:
    """Load and attribute ``paths`` on ``workers`` processes; see the module docstring.

    ``selection`` keeps whole traces, as in :func:`~tracer.analysis.load`.
    ``progress(phase, done, total)`` is called about ten times a second while the
    workers read (bytes), then once when they attribute.

    Raises:
        NoUsableDataError: no trace could be analysed.
        HoptraceError: a worker failed.
    """
    selection = selection or TraceFilter()
    ctx = multiprocessing.get_context("fork")
    plan = _ranges(paths, workers)
    total_bytes = sum(hi - lo for ranges in plan for _, lo, hi in ranges)
    read_bytes = ctx.Value("q", 0)
    conns, procs = [], []
    for ranges in plan:
        parent, child = ctx.Pipe()
        proc = ctx.Process(
            target=_worker,
            args=(child, ranges, group_by, stage_map, selection, read_bytes),
            daemon=True,
        )
        proc.start()
        child.close()
        conns.append(parent)
        procs.append(proc)
    try:
        with gc_paused():
            if progress is not None:
                while not all(c.poll(0) for c in conns):
                    progress("reading", min(read_bytes.value, total_bytes), total_bytes)
                    time.sleep(0.1)
                progress("reading", total_bytes, total_bytes)
            id_lists = [_recv(c) for c in conns]
            if progress is not None:
                progress("attributing", 0, 0)
            seen = Counter(t for ids in id_lists for t in ids)
            split = {t for t, n in seen.items() if n > 1}
            for conn, ids in zip(conns, id_lists, strict=True):
                conn.send(split.intersection(ids) if split else set())
            del id_lists, seen
            results = [_recv(c) for c in conns]
            warnings = Warnings()
            tally = Warnings()
            rows: list[tuple[Any, ...]] = []
            joined: dict[str, list[Any]] = {}
            for _status, part_rows, part_tally, part_warnings, away in results:
                rows.extend(part_rows)
                tally.merge(part_tally)
                warnings.merge(part_warnings)
                for t, spans in away.items():
                    joined.setdefault(t, []).extend(spans)
            joined = {t: s for t, s in joined.items() if selection.matches(s)}
            more, more_tally = _attribute(joined, group_by, stage_map)
            rows.extend(more)
            tally.merge(more_tally)
            breakdowns = [TraceBreakdown(*row) for row in rows]
            return aggregate(breakdowns, group_by, TraceSet({}, warnings), tally)
    finally:
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()


def _recv(conn: Any) -> Any:
    try:
        message = conn.recv()
    except EOFError:
        raise HoptraceError("an analysis worker process died (out of memory?)") from None
    if isinstance(message, tuple) and message and message[0] == "error":
        raise HoptraceError(f"an analysis worker failed: {message[1]}")
    return message
