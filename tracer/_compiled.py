"""Whether hoptrace's compiled parts are used: the C decoder of OTLP JSON lines
(``tracer/spans/_native.c``, the part ``decoder``) and the analysis's per-trace steps
(``tracer/analysis/attribution/_native.c``): the streaming window (``window``) and the
batches' shape words with a split value's span (``words``). They are built at install
where a C compiler is; ``HOPTRACE_NATIVE=off`` runs their Python twins instead (the
reference each is tested against), and a list such as ``HOPTRACE_NATIVE=decoder,window``
uses only the parts it names (to measure what each buys)."""

from __future__ import annotations

import os

__all__ = ["PARTS", "enabled"]

#: The compiled parts by name.
PARTS = ("decoder", "window", "words")


def enabled(part: str | None = None) -> bool:
    """Whether compiled ``part`` (one of :data:`PARTS`; None: any) is to be used: False
    when ``HOPTRACE_NATIVE`` is off (``off``, ``0``, ``no``, ``false``) or is a list of
    parts without it."""
    value = os.environ.get("HOPTRACE_NATIVE", "on").strip().lower()
    if value in ("off", "0", "no", "false"):
        return False
    if value in ("on", "1", "yes", "true", ""):
        return True
    named = {p.strip() for p in value.split(",")}
    return bool(named & set(PARTS)) if part is None else part in named
