"""What a user asks of an analysis, as one frozen value: :class:`Query`.

The CLI builds one from its options (``tracer/cli/_common.py: Selection``) and every
path takes it whole: :func:`~tracer.analysis.load`,
:func:`~tracer.analysis.analyze_sources`, the streamed files and span store on every
core or on Dask, and a Grafana Tempo URL on Dask. So an option given once reaches every
engine, and ``compare`` reads both of its sides with the same options (each side's
run aside). Settings are checked when the query is made, before any trace is read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from tracer._duration import parse_duration
from tracer._errors import ConfigError
from tracer._sources import BACKENDS
from tracer.analysis.model.breakdown import GROUP_BY
from tracer.analysis.model.traceset import TraceFilter

if TYPE_CHECKING:
    from tracer.analysis.model.prepare import PreparedTrace, StageMap
    from tracer.analysis.table._table import Projected

__all__ = ["ENGINES", "Query", "parse_duration"]

#: Where files and the store are analysed: forked processes here, or a Dask cluster.
ENGINES = ("local", "dask")


@dataclass(frozen=True)
class Query:
    """One analysis request: which traces, how they are broken down, and how the
    sources are read. Change a copy with :meth:`but`.

    Filters (whole traces are kept or dropped):
        service, operation: a span of this service (and operation).
        run: a span whose ``hoptrace.run`` matches this glob.
        since: a start within this duration of when the query was made (``15m``,
            ``2h``; a URL: ``1h`` when not given); :attr:`since_ns` is that instant.

    The breakdown:
        group_by: ``stage``, ``service`` or ``operation``.
        stage_map: the user's stage rules (:func:`~tracer.analysis.load_stage_map`).
        split_by: keep each trace's value of this attribute (``--split-by``).
        projection: a what-if (:class:`~tracer.analysis.whatif.retime.Projection`) applied
            to each trace as it is attributed.

    Limits:
        limit: the newest N traces (a URL: the backend's search returns at most N).
        exact_traces: percentiles exact up to this many traces (else
            ``HOPTRACE_EXACT_TRACES``), then from a sketch.
        keep_traces: keep the spans (for waterfalls or the load model); the streamed
            paths keep none, so this loads the sources whole.

    Sources:
        backend: what a URL is: ``auto`` (ask it), ``jaeger`` or ``tempo``.
        traceql: Grafana Tempo's search (``--query``), instead of the one made of
            ``service`` and ``operation``, which still select among the traces found.
        max_answer_bytes: the largest answer read from a URL (bytes or ``"64MiB"``;
            else ``HOPTRACE_MAX_ANSWER_BYTES``, else 256 MiB).
        engine: ``local`` (processes here) or ``dask``; scheduler: the Dask
            scheduler's address (without it, a local cluster runs for the call).
        workers: processes (else ``HOPTRACE_WORKERS``, else one per CPU).
        window_spans: the streaming window (else ``HOPTRACE_WINDOW_SPANS``).

    Raises:
        ConfigError: a bad ``group_by``, ``limit``, ``since``, ``backend`` or
            ``engine``, or a ``scheduler`` without the Dask engine.
    """

    service: str | None = None
    operation: str | None = None
    run: str | None = None
    since: str | None = None
    group_by: str = "stage"
    stage_map: StageMap | None = None
    split_by: str | None = None
    projection: Callable[[PreparedTrace], Projected] | None = None
    limit: int | None = None
    exact_traces: int | None = None
    keep_traces: bool = False
    backend: str = "auto"
    traceql: str | None = None
    max_answer_bytes: int | str | None = None
    engine: str = "local"
    scheduler: str | None = None
    workers: int | None = None
    window_spans: int | None = None
    since_ns: int | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        if self.group_by not in GROUP_BY:
            raise ConfigError(
                f"group_by must be one of {', '.join(GROUP_BY)}, got {self.group_by!r}"
            )
        if self.limit is not None and (isinstance(self.limit, bool) or self.limit <= 0):
            raise ConfigError(f"limit must be a positive number of traces, got {self.limit!r}")
        if self.backend not in BACKENDS:
            raise ConfigError(f"backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if self.engine not in ENGINES:
            raise ConfigError(f"engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        if self.scheduler is not None and self.engine != "dask":
            raise ConfigError("a scheduler address is for the Dask engine: add --engine dask")
        if self.since is not None:
            since_ns = time.time_ns() - int(parse_duration(self.since) * 1e9)
            object.__setattr__(self, "since_ns", since_ns)

    def but(self, **changes: Any) -> Query:
        """A copy with ``changes`` (checked as a new query; a new ``since`` counts
        from now, an unchanged one keeps its instant)."""
        copy = replace(self, **changes)
        if "since" not in changes:
            object.__setattr__(copy, "since_ns", self.since_ns)
        return copy

    @property
    def lookback_s(self) -> float:
        """How far back a trace backend URL is searched: ``since``, else an hour."""
        return parse_duration(self.since) if self.since else 3600.0

    @property
    def keep(self) -> TraceFilter:
        """The filters, as the loaders and the streamed paths apply them."""
        return TraceFilter(self.service, self.operation, self.run, self.since_ns)

    @property
    def streams(self) -> bool:
        """True when the sources may be streamed (no spans kept, no newest-N, no
        TraceQL search), rather than loaded whole."""
        return not self.keep_traces and self.limit is None and self.traceql is None

    @property
    def sources_only(self) -> Query:
        """The same way of reading sources, without filters, split or what-if (a
        report's baseline)."""
        return Query(
            group_by=self.group_by,
            stage_map=self.stage_map,
            exact_traces=self.exact_traces,
            backend=self.backend,
            max_answer_bytes=self.max_answer_bytes,
            engine=self.engine,
            scheduler=self.scheduler,
            workers=self.workers,
            window_spans=self.window_spans,
        )
