"""How many worker processes analyse a large file (the cyclic GC paused while they
work is :func:`tracer.analysis.table._memory.gc_paused`).

``HOPTRACE_WORKERS`` sets the number of processes for large files (1: serial); by
default, the number of CPUs (at most 8).
"""

from __future__ import annotations

import multiprocessing
import os

from tracer._errors import ConfigError

__all__ = ["workers"]


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
