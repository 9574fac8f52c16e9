"""Trace ids kept compactly: an id of 32 lowercase hex digits (what OTLP JSON, the span
store and W3C trace context write) as its 16 bytes, instead of a Python string of about
90 bytes with its list slot.

:class:`IdStore` is the growing column of a :class:`~tracer.analysis.table._table.TraceTable`;
an id of another form (a Jaeger 16-digit id, upper case) is kept as it came, beside
the bytes. :meth:`IdStore.column` gives the ids in a chosen order: a :class:`TraceIds`
(16 bytes a row, read as strings) when every id packed, else an object array of the
strings, as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

__all__ = ["IdStore", "TraceIds", "pack"]

WIDTH = 16
_ZERO = bytes(WIDTH)


def pack(trace_id: str) -> bytes | None:
    """The 16 bytes of an id of 32 lowercase hex digits; None for any other form (it
    would not read back as the same string)."""
    if len(trace_id) != 2 * WIDTH or not (trace_id.islower() or trace_id.isdigit()):
        return None
    try:
        raw = bytes.fromhex(trace_id)
    except ValueError:
        return None
    return raw if len(raw) == WIDTH else None  # (fromhex skips spaces)


def _unpack(raw: bytes) -> str:
    # numpy's fixed-width bytes drop trailing zero bytes on reading: put them back.
    return raw.ljust(WIDTH, b"\0").hex()


class IdStore:
    """The ids of a table's rows, in row order: 16 bytes each, ``odd`` the rows whose
    id is of another form (their bytes are zeros)."""

    __slots__ = ("odd", "raw")

    def __init__(self) -> None:
        self.raw = bytearray()
        self.odd: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self.raw) // WIDTH

    def append(self, trace_id: str) -> None:
        raw = pack(trace_id)
        if raw is None:
            self.odd[len(self)] = trace_id
            raw = _ZERO
        self.raw += raw

    def extend(self, trace_ids: Iterable[str]) -> None:
        ids = list(trace_ids)
        joined = "".join(ids)
        if all(len(t) == 2 * WIDTH for t in ids) and (joined.islower() or joined.isdigit()):
            try:  # the usual batch: every id canonical, packed in one call
                raw = bytes.fromhex(joined)
            except ValueError:
                raw = b""
            if len(raw) == WIDTH * len(ids):
                self.raw += raw
                return
        for t in ids:
            self.append(t)

    def merge(self, other: IdStore) -> None:
        base = len(self)
        self.odd.update({base + r: t for r, t in other.odd.items()})
        self.raw += other.raw
        other.raw, other.odd = bytearray(), {}  # merged in and dropped: freed now

    def __getitem__(self, row: int) -> str:
        t = self.odd.get(row)
        return t if t is not None else self.raw[row * WIDTH : (row + 1) * WIDTH].hex()

    def __iter__(self) -> Iterator[str]:
        return (self[r] for r in range(len(self)))

    def view(self) -> np.ndarray:
        """The bytes as a fixed-width array (no copy); only meaningful without ``odd``."""
        return np.frombuffer(self.raw, f"S{WIDTH}") if self.raw else np.zeros(0, f"S{WIDTH}")

    def column(self, order: np.ndarray) -> TraceIds | np.ndarray:
        """The ids of the rows ``order`` lists, in that order."""
        if not self.odd:
            return TraceIds(self.view()[order])
        return np.array([self[r] for r in order.tolist()], dtype=object)


class TraceIds:
    """A column of trace ids, 16 bytes a row, that reads as strings: ``ids[r]`` is a
    ``str``, ``ids[mask]`` (or an index array) another column, ``ids == trace_id`` a
    boolean array, as with an object array of the strings."""

    __slots__ = ("_raw",)
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, raw: np.ndarray) -> None:
        self._raw = raw

    def __len__(self) -> int:
        return int(self._raw.size)

    @property
    def size(self) -> int:
        return int(self._raw.size)

    def __getitem__(self, key: Any) -> Any:  # a str, or a TraceIds
        if isinstance(key, int | np.integer):
            return _unpack(self._raw[key])
        return TraceIds(self._raw[key])

    def __iter__(self) -> Iterator[str]:
        return map(_unpack, self._raw.tolist())

    def tolist(self) -> list[str]:
        return list(self)

    def __eq__(self, other: object) -> np.ndarray:  # type: ignore[override]
        raw = pack(other) if isinstance(other, str) else None
        if raw is None:
            return np.zeros(self._raw.size, bool)
        return self._raw == raw

    def __ne__(self, other: object) -> np.ndarray:  # type: ignore[override]
        return ~(self == other)

    def __repr__(self) -> str:
        return f"TraceIds({self.tolist()!r})"
