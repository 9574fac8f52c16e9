"""The embedded span store (SQLite) written by ``hoptrace collect``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from tracer.analysis.model.traceset import TraceSet
from tracer.spans.model import Span, Warnings

__all__ = ["load_store", "store_traces"]


def load_store(path: Path, traceset: TraceSet, since_ns: int | None = None) -> None:
    """Add every span of the store at ``path`` (traces started after ``since_ns``).

    Raises:
        SourceError: the file is not a span store.
    """
    from collector.store import SpanStore

    with SpanStore(path, read_only=True) as store:
        traceset.add(store.iter_spans(since_ns, traceset.warnings))


def store_traces(
    path: Path, warnings: Warnings, since_ns: int | None = None, run: str | None = None
) -> Iterator[list[Span]]:
    """The traces of the store at ``path`` one at a time, in trace-id order (those
    that started after ``since_ns``; with ``run``, those of the runs it matches and
    perhaps some others: filter them), one span per (trace id, span id).

    Raises:
        SourceError: the file is not a span store.
    """
    from collector.store import SpanStore

    with SpanStore(path, read_only=True) as store:
        for _, spans in store.traces(since_ns, warnings, run=run):
            first: dict[str, Span] = {}
            for span in spans:
                first.setdefault(span.span_id, span)
            yield list(first.values())
