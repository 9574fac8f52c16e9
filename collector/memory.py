"""The collector's memory limit: what requests in flight may hold, at most.

Like the OpenTelemetry Collector's ``memory_limiter``, the collector refuses new data
with a retryable error before memory runs out, and the exporter's retry brings it
back. Here the limit is kept by reservation rather than by measuring the heap: a
request reserves what it will hold at its peak (its body, the parsed message and
its rows: :data:`BYTES_PER_BODY_BYTE` times its body) before its body is read, and
gives it back when it is answered. A request that does not fit gets 503 with
``Retry-After`` and is not read.

``--max-memory`` (``HOPTRACE_MAX_MEMORY``, keyword ``max_memory``) sets the limit;
the process itself (interpreter, libraries, the store's duplicate check) takes about
100 MiB more.
"""

from __future__ import annotations

import os
import re
import threading

from tracer._errors import ConfigError

__all__ = [
    "BYTES_PER_BODY_BYTE",
    "DEFAULT_MAX_MEMORY_BYTES",
    "MiB",
    "MemoryBudget",
    "Reservation",
    "parse_size",
    "request_cost",
    "resolve_max_memory",
]

MiB = 1024 * 1024
#: The default limit on what requests in flight hold.
DEFAULT_MAX_MEMORY_BYTES = 256 * MiB
#: Peak bytes a request holds per byte of its (uncompressed) body: measured about 7.5
#: for OTLP protobuf and 10 for OTLP JSON (the parsed JSON tree is the larger).
BYTES_PER_BODY_BYTE = {"protobuf": 8, "json": 11}
#: Bytes reserved for any request, however small its body.
_REQUEST_BYTES = 64 * 1024
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1000,
    "kib": 1024,
    "m": MiB,
    "mb": 1000**2,
    "mib": MiB,
    "g": 1024**3,
    "gb": 1000**3,
    "gib": 1024**3,
}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", re.IGNORECASE)


def parse_size(text: str | int, what: str = "--max-memory") -> int:
    """Bytes from ``512MiB``, ``1GiB``, ``300MB``, ``64M`` or a plain number of bytes.

    Raises:
        ConfigError: not a size.
    """
    if isinstance(text, int):
        return text
    match = _SIZE.fullmatch(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ConfigError(f"{what} must be a size such as 512MiB, 1GiB or 300MB, got {text!r}")
    return int(float(match.group(1)) * _UNITS[unit])


def resolve_max_memory(value: int | str | None) -> int:
    """The limit in bytes: ``value`` if given, else ``$HOPTRACE_MAX_MEMORY``, else 256 MiB.

    Raises:
        ConfigError: the value is not a size.
    """
    if value is None:
        env = os.environ.get("HOPTRACE_MAX_MEMORY", "").strip()
        if not env:
            return DEFAULT_MAX_MEMORY_BYTES
        return parse_size(env, "HOPTRACE_MAX_MEMORY")
    return parse_size(value)


def request_cost(body_bytes: int, encoding: str) -> int:
    """Bytes a request with a body of ``body_bytes`` holds at its peak."""
    return _REQUEST_BYTES + BYTES_PER_BODY_BYTE[encoding] * body_bytes


class Reservation:
    """Memory held for one request; :meth:`release` gives it back (once)."""

    __slots__ = ("_budget", "bytes", "_released")

    def __init__(self, budget: MemoryBudget, n_bytes: int):
        self._budget = budget
        self.bytes = n_bytes
        self._released = False

    def grow_to(self, n_bytes: int) -> bool:
        """Hold ``n_bytes`` in all; False (holding what it held) when that does not fit
        or the reservation was released."""
        with self._budget._lock:
            extra = n_bytes - self.bytes
            if self._released or (extra > 0 and not self._budget._take(extra)):
                return False
            self.bytes = max(self.bytes, n_bytes)
            return True

    def release(self) -> None:
        """Give the memory back; later calls do nothing."""
        with self._budget._lock:
            if not self._released:
                self._released = True
                self._budget.in_flight_bytes -= self.bytes


class MemoryBudget:
    """At most ``limit_bytes`` reserved by requests in flight; safe from any thread.

    Raises:
        ValueError: ``limit_bytes`` is not positive.
    """

    def __init__(self, limit_bytes: int):
        if limit_bytes <= 0:
            raise ValueError(f"max_memory must be positive, got {limit_bytes!r}")
        self.limit_bytes = limit_bytes
        self.in_flight_bytes = 0
        self.peak_bytes = 0
        self.refused = 0
        self._lock = threading.Lock()

    def fits(self, n_bytes: int) -> bool:
        """True when ``n_bytes`` more would fit now (nothing is reserved)."""
        with self._lock:
            return self.in_flight_bytes + n_bytes <= self.limit_bytes

    def reserve(self, n_bytes: int) -> Reservation | None:
        """A reservation of ``n_bytes``, or None (counted as refused) when it does not fit."""
        with self._lock:
            if not self._take(n_bytes):
                return None
        return Reservation(self, n_bytes)

    def _take(self, n_bytes: int) -> bool:
        """Add ``n_bytes`` if they fit; the caller holds the lock."""
        if self.in_flight_bytes + n_bytes > self.limit_bytes:
            self.refused += 1
            return False
        self.in_flight_bytes += n_bytes
        self.peak_bytes = max(self.peak_bytes, self.in_flight_bytes)
        return True
