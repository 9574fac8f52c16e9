"""Where a streamed trace is in its input, and reading its lines again.

A trace's place is one int, ``seq``: the file's index, the byte offset of the line its
first span is on, and its order among the traces of that line (:func:`seq`,
:func:`where`). With ``last_end`` (the end of its last line) it is enough to read the
trace again without reading anything else: the straggler join, the exemplar
waterfalls, and a trace whose spans the streaming loop dropped once it had the
trace's batch ticket (:func:`spans_of`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from tracer._errors import SourceError
from tracer.analysis.loaders.files import LINE_BAD, LINE_UNKNOWN, add_line
from tracer.analysis.traceset import TraceSet
from tracer.spans.model import Span, Warnings

__all__ = ["BUFFER", "OFFSET_BITS", "LineTally", "lines", "parse", "seq", "spans_of", "where"]

OFFSET_BITS = 40  # a byte offset (files up to 1 TiB)
BUFFER = 1 << 20  # read buffer: lines of OTLP JSON are tens of kilobytes
_SLOT_BITS = 12  # the order of a trace's first appearance within its line


def seq(file_index: int, offset: int, slot: int) -> int:
    """Where a trace first appears: file, byte offset of the line, order in the line."""
    return (file_index << (OFFSET_BITS + _SLOT_BITS)) | (offset << _SLOT_BITS) | min(slot, 4095)


def where(at: int) -> tuple[int, int]:
    """(file index, byte offset of the line) of a :func:`seq`."""
    return at >> (OFFSET_BITS + _SLOT_BITS), (at >> _SLOT_BITS) & ((1 << OFFSET_BITS) - 1)


@dataclass
class LineTally:
    """Lines of one file that were not JSON or of an unknown shape."""

    bad: int = 0
    unknown: int = 0

    def merge(self, other: LineTally) -> None:
        """Add another part's counts."""
        self.bad += other.bad
        self.unknown += other.unknown

    def report(self, origin: str, warnings: Warnings) -> None:
        """Note the counts as the serial loader does at the end of a file."""
        if self.bad:
            warnings.skip(
                f"{origin}: {self.bad} lines are not JSON (truncated or not a trace file)", 0
            )
        if self.unknown:
            warnings.skip(f"{origin}: {self.unknown} lines are JSON of an unknown shape", 0)


def lines(fh: BinaryIO, lo: int, hi: int) -> Iterator[tuple[int, bytes]]:
    """(offset, line) for the lines in [lo, hi) of an open binary file."""
    fh.seek(lo)
    offset = lo
    while offset < hi:
        line = fh.readline(hi - offset)
        if not line:
            return
        yield offset, line
        offset += len(line)


def parse(line: bytes, sink: TraceSet, origin: str, tally: LineTally) -> None:
    """Add the spans of one line to ``sink``; count it in ``tally`` if it is bad."""
    got = add_line(line, sink, origin)
    if got == LINE_BAD:
        tally.bad += 1
    elif got == LINE_UNKNOWN:
        tally.unknown += 1


def spans_of(
    path: str, trace_id: str, at: int, last_end: int, count: int, fh: BinaryIO | None = None
) -> list[Span]:
    """The ``count`` spans of one trace read again from ``path`` (or the open ``fh`` of
    it, whose position is left alone), from the line where it starts (``seq`` ``at``) to
    the end of its last line, in the order of the input.

    Raises:
        SourceError: the file no longer holds those spans there (it changed while it
            was being read: a Collector rotating or truncating its output).
    """
    start = where(at)[1]
    try:
        if fh is None:
            with open(path, "rb", buffering=0) as raw:
                data = os.pread(raw.fileno(), last_end - start, start)
        else:
            data = os.pread(fh.fileno(), last_end - start, start)
    except OSError as exc:
        raise SourceError(f"cannot read {path!r} again: {exc.strerror or exc}") from None
    sink = TraceSet(warnings=Warnings())  # what the first read warned of is not said again
    found: list[Span] = []
    pos = 0
    while pos < len(data):  # lines as readline cuts them: after each b"\n"
        stop = data.find(b"\n", pos) + 1 or len(data)
        parse(data[pos:stop], sink, path, LineTally())
        found.extend(sink.traces.get(trace_id, ()))
        sink.traces = {}
        pos = stop
    if len(found) != count:
        raise SourceError(
            f"{path!r} changed while it was read: trace {trace_id} had {count} spans at "
            f"bytes {start}-{last_end}, now {len(found)}"
        )
    return found
