"""The embedded span store (SQLite) written by ``hoptrace collect``."""

from __future__ import annotations

from pathlib import Path

from tracer.analysis.traceset import TraceSet

__all__ = ["load_store"]


def load_store(path: Path, traceset: TraceSet, since_ns: int | None = None) -> None:
    """Add every span of the store at ``path`` (traces started after ``since_ns``).

    Raises:
        SourceError: the file is not a span store.
    """
    from collector.store import SpanStore

    with SpanStore(path, read_only=True) as store:
        traceset.add(store.iter_spans(since_ns, traceset.warnings))
