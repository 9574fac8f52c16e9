"""``hoptrace runs``: the runs of a source as JSON and as a table."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tracer.analysis.render.sections import Section
from tracer.analysis.runs import Run

__all__ = ["runs_dict", "runs_sections"]


def _utc(ns: int) -> str:
    """``ns`` (Unix nanoseconds) as UTC to the millisecond, ISO 8601."""
    moment = datetime.fromtimestamp(ns / 1e9, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def runs_dict(runs: list[Run]) -> list[dict[str, Any]]:
    """One object per run, keys ``label``, ``kind``, ``traces``, ``first_start`` and
    ``last_start`` (UTC, ISO 8601), ``first_start_ns``, ``last_start_ns``, ``span_s``
    (seconds from the first start to the last) and ``services``."""
    return [
        {
            "label": r.label,
            "kind": r.kind,
            "traces": r.traces,
            "first_start": _utc(r.first_start_ns),
            "last_start": _utc(r.last_start_ns),
            "first_start_ns": r.first_start_ns,
            "last_start_ns": r.last_start_ns,
            "span_s": round(r.span_s, 3),
            "services": list(r.services),
        }
        for r in runs
    ]


def runs_sections(runs: list[Run]) -> list[Section]:
    """The runs as one table, by first start."""
    traces = sum(r.traces for r in runs)
    return [
        Section(
            title=f"{len(runs)} run{'s' if len(runs) != 1 else ''}, {traces:,} traces",
            headers=[
                "run",
                "kind",
                "traces",
                "first start (UTC)",
                "last start (UTC)",
                "span s",
                "services",
            ],
            rows=[
                [
                    r.label,
                    r.kind,
                    f"{r.traces:,}",
                    _utc(r.first_start_ns),
                    _utc(r.last_start_ns),
                    f"{r.span_s:,.1f}",
                    ", ".join(r.services),
                ]
                for r in runs
            ],
            notes=["pick one with --run LABEL (a glob: 'bench-*-c8', '*:baseline')"]
            if len(runs) > 1
            else [],
        )
    ]
