"""The runs in a source: each ``hoptrace.run`` value, its traces, times and kind.

A trace's run is the ``hoptrace.run`` of its earliest span that carries it (the root
span, in the traces of ``hoptrace bench`` and ``hoptrace demo``), as ``--split-by
hoptrace.run`` groups them; traces without one form the run :data:`NO_RUN`. A run's
kind comes from its label and attributes:

- ``warm-up``: the label ends with ``-warmup`` (``hoptrace bench``) or ``:warmup``;
- ``demo baseline`` / ``demo candidate``: labels ``ID:baseline`` / ``ID:candidate``;
- ``bench level c=N``: its traces carry ``hoptrace.bench.concurrency`` N;
- ``bench level R/s``: its traces carry ``hoptrace.bench.rate`` R (an open loop);
- ``run``: anything else.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tracer import attributes as attrs
from tracer.analysis.aggregate import Analysis
from tracer.analysis.attribution.attribute import NONE, split_value
from tracer.analysis.model.traceset import TraceSet
from tracer.spans.model import Span

RUN = attrs.RUN

__all__ = ["NO_RUN", "RUN", "Run", "RunTally", "list_runs", "mixed_runs_note", "run_kind"]

#: The label of the traces that carry no ``hoptrace.run``.
NO_RUN = "(no run)"
#: How many run labels the mixing note names before ``...``.
_NAMED = 3


@dataclass(frozen=True)
class Run:
    """One run of a source: its traces' first and last start, services and kind."""

    label: str
    traces: int
    first_start_ns: int
    last_start_ns: int
    services: tuple[str, ...]
    kind: str

    @property
    def span_s(self) -> float:
        """Seconds from the first trace's start to the last's."""
        return (self.last_start_ns - self.first_start_ns) / 1e9


def run_kind(label: str, concurrency: str | None = None, rate: str | None = None) -> str:
    """The kind of the run ``label`` (module docstring); ``concurrency`` is its traces'
    ``hoptrace.bench.concurrency``, ``rate`` their ``hoptrace.bench.rate``, if any."""
    if label.endswith(("-warmup", ":warmup")):
        return "warm-up"
    if label.endswith(":baseline"):
        return "demo baseline"
    if label.endswith(":candidate"):
        return "demo candidate"
    if concurrency not in (None, NONE):
        return f"bench level c={concurrency}"
    if rate not in (None, NONE):
        return f"bench level {rate}/s"
    return "run"


class RunTally:
    """The runs of traces given one at a time (:meth:`add`): it keeps a few numbers and
    the services per run, not the traces, so a store of any size is listed in bounded
    memory."""

    def __init__(self) -> None:
        # label -> [traces, first start, last start, services, concurrency levels]
        self._seen: dict[str, list] = {}

    def add(self, spans: Iterable[Span]) -> None:
        """Count the trace made of ``spans``."""
        spans = list(spans)
        if not spans:
            return
        label = split_value(spans, attrs.RUN)
        level = split_value(spans, attrs.BENCH_CONCURRENCY)
        if level == NONE:
            rate = split_value(spans, attrs.BENCH_RATE)
            level = NONE if rate == NONE else f"{_number(rate)}/s"
        start = min(s.start_ns for s in spans)
        row = self._seen.get(NO_RUN if label == NONE else label)
        if row is None:
            row = self._seen[NO_RUN if label == NONE else label] = [0, start, start, set(), set()]
        row[0] += 1
        row[1] = min(row[1], start)
        row[2] = max(row[2], start)
        row[3].update(s.service for s in spans)
        if level != NONE:
            row[4].add(level)

    def runs(self) -> list[Run]:
        """Every run counted, by first start (ties by label)."""
        runs = [
            Run(
                label=label,
                traces=traces,
                first_start_ns=first,
                last_start_ns=last,
                services=tuple(sorted(services)),
                kind="run"
                if label == NO_RUN
                else _kind(label, next(iter(levels)) if len(levels) == 1 else None),
            )
            for label, (traces, first, last, services, levels) in self._seen.items()
        ]
        return sorted(runs, key=lambda r: (r.first_start_ns, r.label))


def list_runs(traceset: TraceSet) -> list[Run]:
    """Every run of ``traceset``, by first start (ties by label)."""
    tally = RunTally()
    for spans in traceset.traces.values():
        tally.add(spans)
    return tally.runs()


def _number(text: str) -> str:
    """``20.0`` as ``20``; anything not a number as it is."""
    try:
        return f"{float(text):g}"
    except ValueError:
        return text


def _kind(label: str, level: str | None) -> str:
    """``run_kind`` of a level read as ``N`` (clients) or ``R/s`` (an open loop)."""
    if level is not None and level.endswith("/s"):
        return run_kind(label, rate=level[:-2])
    return run_kind(label, level)


def mixed_runs_note(analysis: Analysis) -> str | None:
    """One line saying the traces of ``analysis`` (attributed with ``split_by=
    hoptrace.run``) mix several runs, or None when they hold at most one."""
    labels = sorted(
        (value for value in analysis.split_parts or {} if value != NONE),
        key=lambda v: (-(analysis.split_parts or {})[v][0], v),
    )
    if len(labels) < 2:
        return None
    named = ", ".join(labels[:_NAMED]) + (", ..." if len(labels) > _NAMED else "")
    return (
        f"note: these traces mix {len(labels)} runs ({named}); pick one with --run PATTERN "
        "(hoptrace runs lists them)"
    )
