"""Where a streamed trace is in its input, and reading lines.

A trace's place is one int, ``seq``: the file's index, the byte offset of the line its
first span is on, and its order among the traces of that line (:func:`seq`,
:func:`where`). With ``last_end`` (the end of its last line) it is enough to read the
trace again without reading anything else: the straggler join and the exemplar
waterfalls do.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from tracer.analysis.loaders.files import LINE_BAD, LINE_UNKNOWN, add_line
from tracer.analysis.model.traceset import TraceSet
from tracer.spans.model import Warnings

__all__ = ["BUFFER", "LAST_SLOT", "OFFSET_BITS", "LineTally", "lines", "parse", "seq", "where"]

OFFSET_BITS = 40  # a byte offset (files up to 1 TiB)
BUFFER = 1 << 20  # read buffer: lines of OTLP JSON are tens of kilobytes
_SLOT_BITS = 12  # the order of a trace's first appearance within its line
#: The last order :func:`seq` tells apart (later traces of a line share it).
LAST_SLOT = (1 << _SLOT_BITS) - 1


def seq(file_index: int, offset: int, slot: int) -> int:
    """Where a trace first appears: file, byte offset of the line, order in the line."""
    return (
        (file_index << (OFFSET_BITS + _SLOT_BITS)) | (offset << _SLOT_BITS) | min(slot, LAST_SLOT)
    )


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
