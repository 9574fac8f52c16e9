"""Whether hoptrace's compiled parts are used: the C decoder of OTLP JSON lines
(``tracer/spans/_native.c``) and the analysis's per-trace steps: the streaming window,
the batches' shape words, a split value's span (``tracer/analysis/execution/_native.c``).
They are built at install where a C compiler is; ``HOPTRACE_NATIVE=off`` runs their
Python twins instead (the reference each is tested against)."""

from __future__ import annotations

import os

__all__ = ["enabled"]


def enabled() -> bool:
    """False when ``HOPTRACE_NATIVE`` is off (``off``, ``0``, ``no``, ``false``)."""
    return os.environ.get("HOPTRACE_NATIVE", "on").strip().lower() not in (
        "off",
        "0",
        "no",
        "false",
    )
