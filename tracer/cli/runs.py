"""``hoptrace runs``: the runs in a source, to pick one with ``--run``."""

from __future__ import annotations

import click

from tracer.cli._common import Selection, busy, emit, source_options

__all__ = ["COMMANDS"]


@click.command()
@click.argument("sources", nargs=-1)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(("table", "json")),
    default="table",
    show_default=True,
    help="json: a list of objects with label, kind, traces, first_start, last_start "
    "(UTC), first_start_ns, last_start_ns, span_s and services.",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to FILE.")
@source_options
def runs(sources: tuple[str, ...], fmt: str, output: str | None, selection: Selection) -> None:
    """List the runs in SOURCES (each hoptrace.run value) and what each one is.

    Per run: its traces, first and last start (UTC), the services seen and its kind:
    warm-up, bench level c=N, demo baseline or candidate, or run. Traces without a
    hoptrace.run are the run "(no run)". Pick one for the other commands with --run.
    """
    from tracer.analysis import render
    from tracer.analysis.runs import list_runs

    with busy(sources, "reading traces for their runs") as notices:
        found = _store_runs(sources, selection)
        if found is None:
            found = list_runs(selection.load(sources, notices))
    if fmt == "json":
        emit(render.dumps(render.runs_dict(found)), output)
    else:
        emit(render.to_table(render.runs_sections(found)), output)


def _store_runs(sources: tuple[str, ...], selection: Selection) -> list | None:
    """The runs of span stores read one trace at a time (bounded memory whatever their
    size), or None when a source is not a store or the options need the traces."""
    from pathlib import Path

    from tracer._errors import NoUsableDataError
    from tracer.analysis.loaders.local import SpanStoreFile
    from tracer.analysis.loaders.store import store_traces
    from tracer.analysis.runs import RunTally
    from tracer.spans.model import Warnings

    query = selection.base
    if not sources or query.limit is not None or not all(map(SpanStoreFile.recognise, sources)):
        return None
    keep, tally, warnings, seen = query.keep, RunTally(), Warnings(), 0
    for source in sources:
        for spans in store_traces(Path(source).expanduser(), warnings, query.since_ns, query.run):
            seen += 1
            if keep.matches(spans):
                tally.add(spans)
    if not seen:
        raise NoUsableDataError(f"no traces in {', '.join(sources)}")
    return tally.runs()


COMMANDS = (runs,)
