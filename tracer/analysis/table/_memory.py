"""Memory freed during an analysis given back to the system, not kept resident.

glibc's allocator keeps freed memory at the top of its heap for reuse until more than
its trim threshold is free; the threshold starts at 128 KiB but rises with every large
block freed, up to 64 MiB (``mallopt(3)``, ``M_TRIM_THRESHOLD`` and
``M_MMAP_THRESHOLD``: "dynamic mmap threshold"). Streaming a file frees the window's
spans over and over, so tens of MiB stayed resident under the table and the
aggregation that follow. :func:`trim_freed_memory` fixes the threshold at its default
once for the process (which also ends the dynamic adjustment), and gives back what is
free now, inside the heap too (``malloc_trim(3)``); elsewhere than glibc it does
nothing.

Loading a million spans creates millions of long-lived objects; the cyclic garbage
collector would scan them again and again (about a fifth of the time) although the
analyzer makes no reference cycles: :func:`gc_paused` pauses it for a load or an
aggregation (and has freed memory given back as it is freed).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import platform
from collections.abc import Iterator

__all__ = ["TRIM_THRESHOLD_BYTES", "gc_paused", "trim_freed_memory"]

TRIM_THRESHOLD_BYTES = 128 * 1024  # glibc's own default, kept from rising
_M_TRIM_THRESHOLD = -1  # <malloc.h>
_libc: list[ctypes.CDLL | None] = []


def _glibc() -> ctypes.CDLL | None:
    if not _libc:
        found = None
        if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
            try:
                found = ctypes.CDLL(None)
                found.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
            except (OSError, AttributeError):  # no such symbols: nothing to tune
                found = None
        _libc.append(found)
    return _libc[0]


def trim_freed_memory(now: bool = False) -> None:
    """Fix glibc's trim threshold at 128 KiB for this process (the first call); with
    ``now``, also give back every free page the heap holds (a pass over the heap:
    for the moment before a large allocation). No-op elsewhere than glibc."""
    libc = _glibc()
    if now and libc is not None:
        libc.malloc_trim(0)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector (reference counting still frees memory), and
    have freed memory given back to the system (:func:`trim_freed_memory`)."""
    trim_freed_memory()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
