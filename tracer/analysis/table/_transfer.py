"""A :class:`~tracer.analysis.table._table.TraceTable` sent from a worker process to its
parent without a pickled copy of its arrays.

Pickling a table over a pipe held it twice in the worker (the table and its pickle)
and twice in the parent (the bytes received and the table unpickled): at five million
spans on two workers, about 150 MiB more at the peak than the tables themselves. Here
the table's small parts (names, warnings, marks) are pickled with each array replaced
by a placeholder, and then each array's memory is sent as it is
(``Connection.send_bytes``) and freed in the worker; the parent receives each straight
into an array of the right size (``Connection.recv_bytes_into``). So while a table
crosses, the worker's memory falls as the parent's rises.
"""

from __future__ import annotations

from array import array
from typing import Any

from tracer.analysis.table._columns import _Projections, _Sparse
from tracer.analysis.table._ids import IdStore
from tracer.analysis.table._table import TraceTable

__all__ = ["receive_table", "send_table"]

#: The objects of a table that hold arrays (each of them, and the table, in turn).
_HOLDERS = (TraceTable, IdStore, _Sparse, _Projections)


class _Sent:
    """An array sent after the pickle: its place in the order sent, type and size."""

    __slots__ = ("order", "size", "typecode")

    def __init__(self, order: int, typecode: str | None, size: int) -> None:
        self.order, self.typecode, self.size = order, typecode, size

    def __getstate__(self) -> tuple[int, str | None, int]:
        return self.order, self.typecode, self.size

    def __setstate__(self, state: tuple[int, str | None, int]) -> None:
        self.order, self.typecode, self.size = state

    def empty(self) -> array | bytearray:
        """A zeroed array (or bytearray) of this size, to receive into."""
        if self.typecode is None:
            return bytearray(self.size)
        one = array(self.typecode, [0.0 if self.typecode in "fd" else 0])
        return one * (self.size // one.itemsize)


def _names(holder: object) -> list[str]:
    if hasattr(holder, "__dict__"):
        return list(vars(holder))
    slots: tuple[str, ...] = type(holder).__slots__  # type: ignore[attr-defined]
    return list(slots)


def _slots(holder: object, kind: type) -> list[tuple[object, str]]:
    """(holder, attribute) of every value of type ``kind`` in the table ``holder``, in a
    fixed order."""
    found: list[tuple[object, str]] = []
    stack = [holder]
    while stack:
        obj = stack.pop()
        for name in _names(obj):
            value = getattr(obj, name, None)
            if isinstance(value, kind):
                found.append((obj, name))
            elif isinstance(value, _HOLDERS):
                stack.append(value)
    return found


def send_table(conn: Any, table: TraceTable, *before: Any) -> None:
    """Send ``(*before, table)`` over ``conn``; ``table`` is left empty (each array is
    freed once sent)."""
    buffers: list[array | bytearray] = []
    for holder, name in _slots(table, (array, bytearray)):  # type: ignore[arg-type]
        buf = getattr(holder, name)
        code = buf.typecode if isinstance(buf, array) else None
        size = len(buf) * (buf.itemsize if isinstance(buf, array) else 1)
        setattr(holder, name, _Sent(len(buffers), code, size))
        buffers.append(buf)
    conn.send((*before, table))
    for i, buf in enumerate(buffers):
        if len(buf):
            conn.send_bytes(buf)
        buffers[i] = bytearray()  # freed now: the worker shrinks as the parent grows
    table.__init__()  # type: ignore[misc]


def receive_table(conn: Any, message: tuple) -> tuple:
    """The ``message`` :func:`send_table` sent first, its table's arrays received
    from ``conn``."""
    table = message[-1]
    sent = sorted(
        ((getattr(h, n), h, n) for h, n in _slots(table, _Sent)), key=lambda s: s[0].order
    )
    for placeholder, holder, name in sent:
        buf = placeholder.empty()
        if placeholder.size:
            conn.recv_bytes_into(buf)
        setattr(holder, name, buf)
    return message
