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
        found = list_runs(selection.load(sources, notices))
    if fmt == "json":
        emit(render.dumps(render.runs_dict(found)), output)
    else:
        emit(render.to_table(render.runs_sections(found)), output)


COMMANDS = (runs,)
