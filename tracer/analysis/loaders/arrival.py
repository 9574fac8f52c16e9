"""Waiting for traces to arrive: every service exports on its own batch timer, so a
trace shows up in a store or backend piece by piece.

One rule says when a trace is complete: every span's parent has arrived, and every
service the run went through has reported. The services of a run are the ones named
by the caller plus every service seen in any of the run's traces so far (a trace
missing a service that its siblings passed through is still on its way).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable
from pathlib import Path

from tracer._errors import NoUsableDataError, SourceError
from tracer._sources import is_url
from tracer.analysis.loaders import load
from tracer.analysis.loaders._http import QUIET, Listener, trace_ids_of
from tracer.analysis.loaders.url import resolve_backend
from tracer.analysis.model.traceset import TraceSet
from tracer.analysis.query import Query
from tracer.spans.model import Span

__all__ = ["is_complete", "run_services", "wait_for_traces"]


def run_services(traces: Iterable[list[Span]], named: Collection[str] = ()) -> set[str]:
    """The services a run went through: ``named`` and every service seen in ``traces``."""
    services = set(named)
    for spans in traces:
        services.update(s.service for s in spans)
    return services


def is_complete(spans: list[Span], services: Collection[str], min_services: int = 1) -> bool:
    """True when every span's parent is among ``spans``, every one of ``services`` has a
    span in it, and it spans at least ``min_services`` services."""
    ids = {s.span_id for s in spans}
    if any(s.parent_id is not None and s.parent_id not in ids for s in spans):
        return False
    present = {s.service for s in spans}
    return len(present) >= min_services and set(services) <= present


def wait_for_traces(
    source: str,
    trace_ids: Collection[str],
    *,
    deadline_s: float,
    since_s: float,
    services: Collection[str] = (),
    min_services: int = 1,
    backend: str = "auto",
    listener: Listener = QUIET,
    poll_s: float = 0.3,
) -> tuple[TraceSet, int]:
    """Read ``source`` until every trace in ``trace_ids`` is complete, or the deadline.

    Args:
        source: a span store path or a trace backend URL (Jaeger, Tempo), which is
            asked for the traces by id, and again only for those still incomplete.
        trace_ids: the traces waited for.
        deadline_s: give up after this many seconds.
        since_s: read only traces that started within this many seconds (a store grows).
        services: services every trace must have (more are learnt from the traces).
        min_services: traces must have at least this many services (2: a client
            and the server it called).
        backend: for a URL: ``auto`` (ask it, once), ``jaeger`` or ``tempo``.
        listener: told which backend a URL is and how fetching goes.
        poll_s: pause between reads.

    Returns:
        The traces found (maybe not all) and how many of those are still incomplete.

    Raises:
        ConfigError: a bad source option.
        SourceError: a store that does not exist or cannot be read, or a URL that
            answers as neither Jaeger nor Tempo (a store still empty and a backend
            still indexing are retried until the deadline).
    """
    wanted = set(trace_ids_of(trace_ids))
    remote = is_url(source)
    if remote:
        backend = resolve_backend(source, backend, listener)
    elif not Path(source).expanduser().exists():
        raise SourceError(
            f"trace source {source!r} does not exist; give the span store or backend URL "
            "the services send their spans to"
        )
    begun = time.monotonic()
    end = begun + deadline_s
    have = TraceSet()
    incomplete: set[str] = set()
    while True:
        since = f"{since_s + time.monotonic() - begun:.0f}s"
        try:
            if remote:
                pending = (wanted - set(have.traces)) | incomplete
                found = load([source], Query(backend=backend), trace_ids=pending, listener=listener)
                have = TraceSet({**have.traces, **found.traces}, found.warnings)
            else:
                have = load([source], Query(since=since)).subset(wanted)
        except NoUsableDataError:
            pass  # a store still empty
        except SourceError:
            if not remote:
                raise
            # a backend still indexing, or one trace's fetch failing for now
        expected = run_services(have.traces.values(), services)
        incomplete = {
            tid
            for tid, spans in have.traces.items()
            if not is_complete(spans, expected, min_services)
        }
        if (not incomplete and len(have.traces) == len(wanted)) or time.monotonic() > end:
            return have, len(incomplete)
        time.sleep(poll_s)
