"""Streaming analysis of OTLP JSON-lines files in bounded memory.

Lines are read in order and their spans grouped by trace. A trace is complete once
the input has moved ``window_spans`` spans past its last span (the Collector writes a
trace's spans close together): it is attributed, its breakdown goes into a compact
:class:`~tracer.analysis.table._table.TraceTable` and its spans are dropped. So memory holds
the window's spans and a few hundred bytes a trace, not the file.

A trace whose spans straggle in after it was attributed (or that crosses a range or
file boundary) gets one row per part. :func:`join_parts` finds them at the end, drops
the parts, reads just the lines between each part's first and last line again, and
attributes the joined trace, so the numbers are the whole-file analysis's exactly.

``HOPTRACE_WINDOW_SPANS`` (keyword ``window_spans``) sets the largest window; default
:data:`WINDOW_SPANS`. A stream starts with a window of :data:`FIRST_WINDOW` spans (or
the largest, if smaller) and doubles it, up to the largest, whenever a part of a trace
arrives after the trace was attributed: a window that holds just what the input needs
is faster (the spans it holds stay in the processor's caches: 6.7 s against 7.9 s on a
million spans of a Collector's layout, docs/scaling.md), and the numbers do not depend
on it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tracer._errors import positive_setting
from tracer.analysis.attribution.attribute import Attributor
from tracer.analysis.execution.lines import BUFFER, LAST_SLOT, OFFSET_BITS, LineTally, parse
from tracer.analysis.execution.lines import lines as lines_in
from tracer.analysis.execution.lines import seq as seq_of
from tracer.analysis.execution.lines import where as place_of
from tracer.analysis.model.traceset import TraceSet
from tracer.analysis.table._table import TraceTable
from tracer.spans.model import Span, Warnings

__all__ = [
    "FIRST_WINDOW",
    "WINDOW_SPANS",
    "Attributor",
    "ACROSS_FILES",
    "LineTally",
    "Window",
    "attribute_parts",
    "join_parts",
    "read_traces",
    "stream_range",
    "stream_store",
    "window_spans",
]

#: Spans read past a trace's last span before it counts as complete (docs/scaling.md:
#: 20,000 held 50 MiB less than 100,000 on a million spans, at the same speed; a trace
#: whose parts lie further apart is joined at the end, as the module docstring says).
WINDOW_SPANS = 20_000
#: The window a stream starts with (see the module docstring).
FIRST_WINDOW = 2_048
#: ``last_end`` of a trace joined from parts in more than one file.
ACROSS_FILES = -1

_Attribute = Callable[[str, list[Span], int, int], None]


def window_spans(value: int | None = None) -> int:
    """The streaming window: ``value``, else ``HOPTRACE_WINDOW_SPANS``, else the default.

    Raises:
        ConfigError: not a positive integer.
    """
    return positive_setting(value, "window_spans", "HOPTRACE_WINDOW_SPANS", WINDOW_SPANS, "spans")


def stream_range(
    path: str,
    file_index: int,
    lo: int,
    hi: int,
    attribute: _Attribute,
    window: int,
    loaded: Warnings,
    lines: LineTally,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Stream the lines in bytes [lo, hi) of ``path``, attributing traces as they
    complete (see the module docstring: ``window`` is the largest window); the rest are
    attributed at ``hi``.

    Loader warnings go to ``loaded``, bad-line counts to ``lines``; ``progress(bytes)``
    is told the bytes read every 256 lines.
    """
    held = Window(min(window, FIRST_WINDOW), window, LAST_SLOT)
    sink = TraceSet(warnings=loaded)
    pending = 0
    with open(path, "rb", buffering=BUFFER) as fh:
        for n, (offset, line) in enumerate(lines_in(fh, lo, hi), 1):
            parse(line, sink, path, lines)
            if sink.traces:
                held.take(sink.traces, seq_of(file_index, offset, 0), offset + len(line), attribute)
                sink.traces = {}
            if progress is not None:
                pending += len(line)
                if n % 256 == 0:
                    progress(pending)
                    pending = 0
    if progress is not None and pending:
        progress(pending)
    held.rest(attribute)


class Window:
    """The streaming window (the module docstring): the parts of each trace grouped as
    lines arrive, a trace handed to ``attribute(trace id, spans, seq, end)`` once
    ``window`` spans have been read past its last part; the window doubles, up to
    ``largest``, when a part of a trace arrives after the trace was handed over. A
    trace's ``seq`` is its line's with its order in the line, up to ``last_slot``.
    (A compiled twin bought nothing end to end: docs/scaling.md.)"""

    def __init__(self, window: int, largest: int, last_slot: int) -> None:
        if window <= 0 or largest <= 0:
            raise ValueError("a window is a positive number of spans")
        self.window, self.largest = min(window, largest), largest
        self._last_slot = last_slot
        # id -> [spans, seq, spans read at its last part (its mark), its last line's end]
        self._open: dict[str, list[Any]] = {}
        self._queue: deque[tuple[int, str]] = deque()  # (mark, id) of every part
        self._seen = 0
        # The traces handed over last (as many as the largest window has spans): a part
        # of one of them that arrives now says the window is too small.
        self._closed: set[str] = set()
        self._closing: deque[str] = deque()

    def take(
        self, traces: dict[str, list[Span]], seq: int, end: int, attribute: _Attribute
    ) -> None:
        """A line's traces (first appearing at ``seq`` | their order in the line, the
        line ending at byte ``end``) into the window; the traces now complete to
        ``attribute``."""
        open_traces, queue = self._open, self._queue
        seen = self._seen
        for slot, (tid, spans) in enumerate(traces.items()):
            seen += len(spans)
            entry = open_traces.get(tid)
            if entry is None:
                open_traces[tid] = [spans, seq | min(slot, self._last_slot), seen, end]
                if self.window < self.largest and tid in self._closed:
                    self.window = min(2 * self.window, self.largest)
                    if self.window == self.largest:
                        self._closed.clear()
                        self._closing.clear()
            else:
                entry[0].extend(spans)
                entry[2], entry[3] = seen, end
            queue.append((seen, tid))
        self._seen = seen
        while queue and seen - queue[0][0] > self.window:
            mark, tid = queue.popleft()
            entry = open_traces.get(tid)
            if entry is not None and entry[2] == mark:
                del open_traces[tid]
                attribute(tid, entry[0], entry[1], entry[3])
                if self.window < self.largest:
                    self._closed.add(tid)
                    self._closing.append(tid)
                    if len(self._closing) > self.largest:
                        self._closed.discard(self._closing.popleft())

    def rest(self, attribute: _Attribute) -> None:
        """Every trace still open to ``attribute``, in the order they first appeared."""
        open_traces, self._open = self._open, {}
        for tid, (spans, seq, _, end) in open_traces.items():
            attribute(tid, spans, seq, end)


def join_parts(table: TraceTable, paths: Sequence[str], attribute: Attributor) -> int:
    """Join the traces that ``table`` holds in several parts: drop the parts, read their
    lines again, attribute each whole trace once. Returns the number joined."""
    parts = table.repeated()
    if not parts:
        return 0
    table.drop(set(parts))
    attribute_parts(parts, paths, attribute)
    return len(parts)


def attribute_parts(
    parts: dict[str, list[tuple[int, int]]], paths: Sequence[str], attribute: Attributor
) -> None:
    """Read again the lines of each trace's parts (``{id: [(seq, last_end), ...]}``, as
    :meth:`TraceTable.repeated` gives them) and attribute each whole trace once."""
    regions: dict[int, list[tuple[int, int]]] = {}
    for pieces in parts.values():
        for seq, end in pieces:
            file_index, offset = place_of(seq)
            regions.setdefault(file_index, []).append((offset, end))
    joined: dict[str, list[Span]] = {t: [] for t in parts}
    for tid, spans in _reread(paths, regions):
        if tid in joined:
            joined[tid].extend(spans)
    for tid, pieces in sorted(parts.items(), key=lambda kv: min(kv[1])):
        files = {place_of(seq)[0] for seq, _ in pieces}
        # A trace across files ends in another file than it starts: no one end offset.
        end = max(e for _, e in pieces) if len(files) == 1 else ACROSS_FILES
        attribute(tid, joined[tid], min(s for s, _ in pieces), end)
    attribute.flush()  # the traces it queued, into its table


def read_traces(paths: Sequence[str], where: dict[str, tuple[int, int]]) -> TraceSet:
    """The spans of a few traces, read again from their place in ``paths``: trace id ->
    (``seq``, ``last_end``) as the table kept them. Only the lines between each trace's
    first and last line are read (to the end of the input for a trace that spans
    files); spans in the order of the input, as the whole-file loader holds them."""
    regions: dict[int, list[tuple[int, int]]] = {}
    for seq, end in where.values():
        file_index, offset = place_of(seq)
        if end == ACROSS_FILES:
            regions.setdefault(file_index, []).append((offset, 1 << OFFSET_BITS))
            for later in range(file_index + 1, len(paths)):
                regions.setdefault(later, []).append((0, 1 << OFFSET_BITS))
        else:
            regions.setdefault(file_index, []).append((offset, end))
    found = TraceSet()
    for tid, spans in _reread(paths, regions):
        if tid in where:
            found.add(spans)
    return found


def _reread(
    paths: Sequence[str], regions: dict[int, list[tuple[int, int]]]
) -> Iterator[tuple[str, list[Span]]]:
    """(trace id, spans) of each line in the byte ``regions`` of each file (file index
    -> [(first byte, end byte)]), files in order; what the first read warned of is not
    said again."""
    sink = TraceSet(warnings=Warnings())
    for file_index in sorted(regions):
        path = paths[file_index]
        with open(path, "rb", buffering=BUFFER) as fh:
            for lo, hi in _merged(regions[file_index]):
                for _, line in lines_in(fh, lo, hi):
                    parse(line, sink, path, LineTally())
                    yield from sink.traces.items()
                    sink.traces = {}


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def stream_store(
    path: str,
    since_ns: int | None,
    attribute: Callable[[str, list[Span], int, int], None],
    loaded: Warnings,
    trace_ids: tuple[str | None, str | None] = (None, None),
    run: str | None = None,
) -> None:
    """Attribute every trace of the span store at ``path`` (with ``lo <= trace id < hi``
    for ``trace_ids`` = (lo, hi); None: no bound), read in trace-id order a chunk at a
    time: one trace's spans are held at once, and none straggles. ``since_ns`` and
    ``run`` (a glob) let the store read only the partitions and traces they can keep,
    by its indexes (``attribute`` still applies every filter)."""
    from collector.store import SpanStore

    with SpanStore(path, read_only=True) as store:
        # The first span's place orders the warnings as a whole-store read would.
        for seq, spans in store.traces(since_ns, loaded, trace_ids=trace_ids, run=run):
            attribute(spans[0].trace_id, spans, seq, 0)
