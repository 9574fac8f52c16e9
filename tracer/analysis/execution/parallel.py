"""Speed for large trace sets: the cyclic GC paused, and how many worker processes.

Loading a million spans creates millions of long-lived objects; the cyclic garbage
collector would scan them again and again (about a fifth of the time) although the
analyzer makes no reference cycles. While it is paused, freed memory is also given
back to the system as it is freed (:mod:`tracer.analysis.table._memory`).

``HOPTRACE_WORKERS`` sets the number of processes for large files (1: serial); by
default, the number of CPUs (at most 8).
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
from collections.abc import Iterator

from tracer._errors import ConfigError
from tracer.analysis.table._memory import trim_freed_memory

__all__ = ["gc_paused", "workers"]


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


def workers(value: int | None = None) -> int:
    """Processes for a large file: ``value`` (the keyword wins), else
    ``HOPTRACE_WORKERS``, else one per CPU (at most 8); 1 without ``fork``.

    Raises:
        ConfigError: ``value`` or ``HOPTRACE_WORKERS`` is not a positive integer.
    """
    if value is not None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"workers must be a positive integer, got {value!r}")
        return value if "fork" in multiprocessing.get_all_start_methods() else 1
    setting = os.environ.get("HOPTRACE_WORKERS", "").strip()
    if setting:
        count = int(setting) if setting.isdecimal() else 0
        if count < 1:
            raise ConfigError(f"HOPTRACE_WORKERS must be a positive integer, got {setting!r}")
        return count
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, min(os.cpu_count() or 1, 8))
