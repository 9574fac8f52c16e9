"""The ``hoptrace`` command line.

Every user mistake is one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from tracer._errors import ConfigError, HoptraceError

__all__ = ["main"]

FORMATS = ("table", "json", "markdown", "html")


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except HoptraceError as exc:
            click.echo(f"hoptrace: error: {exc}", err=True)
            ctx.exit(2)
        except KeyboardInterrupt:
            click.echo("hoptrace: interrupted", err=True)
            ctx.exit(130)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="hoptrace")
def main() -> None:
    """hoptrace: where every millisecond of a request to an AI model goes.

    Trace a chain (client, gateway, auth, context, inference, postprocess, return),
    attribute each trace's time along its critical path, and see what a faster model
    would really buy.
    """


def _emit(text: str, output: str | None) -> None:
    if output:
        Path(output).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text.rstrip("\n"))


def _parse_prices(values: tuple[str, ...]) -> dict[str, tuple[float, float]]:
    prices = {}
    for value in values:
        try:
            model, rest = value.rsplit("=", 1)
            tin, tout = rest.split(":")
            prices[model] = (float(tin), float(tout))
        except ValueError:
            raise ConfigError(
                f"--price must look like MODEL=IN:OUT (price per 1,000 tokens), got {value!r}"
            ) from None
    return prices


@dataclass(frozen=True)
class _Selection:
    """Which traces to read: the source options every analysis command shares."""

    service: str | None = None
    operation: str | None = None
    limit: int | None = None
    since: str | None = None
    run: str | None = None
    stage_map_path: str | None = None

    def load(self, sources: tuple[str, ...]) -> Any:
        from tracer.analysis import load

        return load(
            list(sources),
            service=self.service,
            operation=self.operation,
            limit=self.limit,
            since=self.since,
            run=self.run,
        )

    def stage_map(self) -> Any:
        return _stage_map(self.stage_map_path)


def _source_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add the source options; the command receives them as ``selection``."""

    @functools.wraps(func)
    def command(
        *args: Any,
        service: str | None,
        operation: str | None,
        limit: int | None,
        since: str | None,
        run_name: str | None,
        stage_map: str | None,
        **kwargs: Any,
    ) -> Any:
        selection = _Selection(service, operation, limit, since, run_name, stage_map)
        return func(*args, selection=selection, **kwargs)

    for option in reversed(
        [
            click.option("--service", help="Keep traces that contain a span of this service."),
            click.option("--operation", help="Keep traces that contain a span of this operation."),
            click.option("--limit", type=int, help="Keep the most recent N traces."),
            click.option(
                "--since", help="Keep traces that started within this time (15m, 2h, 1d)."
            ),
            click.option(
                "--run",
                "run_name",
                help="Keep traces of this run (hoptrace.run attribute; glob, e.g. 'bench-*-c8').",
            ),
            click.option(
                "--stage-map",
                type=click.Path(dir_okay=False),
                help="TOML file mapping service/operation patterns to stages.",
            ),
        ]
    ):
        command = option(command)
    return command


def _analyze_big_files(
    sources: tuple[str, ...], group_by: str, smap: Any, selection: _Selection
) -> Any:
    """Large OTLP JSON-lines files on every core (None when that path does not apply)."""
    import time

    from tracer.analysis import parse_duration
    from tracer.analysis._bigfile import analyze_files, eligible
    from tracer.analysis._parallel import workers
    from tracer.analysis.traceset import TraceFilter

    if not sources or any(s.startswith(("http://", "https://")) for s in sources):
        return None
    paths = [Path(s).expanduser() for s in sources]
    count = workers()
    if count < 2 or not eligible(paths):
        return None
    since = selection.since
    since_ns = time.time_ns() - int(parse_duration(since) * 1e9) if since else None
    keep = TraceFilter(selection.service, selection.operation, selection.run, since_ns)
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as bar:
        task = bar.add_task(f"reading on {count} processes", total=None)

        def show(phase: str, done: int, total: int) -> None:
            if phase == "reading":
                bar.update(task, completed=done, total=total)
            else:
                bar.update(task, description="attributing traces")

        return analyze_files(paths, group_by, smap, count, keep, show)


@contextlib.contextmanager
def _busy(sources: tuple[str, ...], what: str) -> Iterator[None]:
    """A spinner on stderr (terminals only) while large sources are read."""
    from rich.console import Console

    console = Console(stderr=True)
    size = 0
    for source in sources or ():
        path = Path(source).expanduser()
        size += path.stat().st_size if path.is_file() else 0
    remote = any(s.startswith(("http://", "https://")) for s in sources)
    if not console.is_terminal or (size < 16 * 1024 * 1024 and not remote):
        yield
        return
    label = f"{what} ({size / 1e6:,.0f} MB)" if size else what
    with console.status(label):
        yield


def _stage_map(path: str | None) -> Any:
    if not path:
        return None
    from tracer.analysis import load_stage_map

    return load_stage_map(path)


store_option = click.option(
    "--store",
    type=click.Path(dir_okay=False),
    help="Span store file [default: $HOPTRACE_STORE or ~/.local/share/hoptrace/spans.db].",
)
_group_by_option = click.option(
    "--group-by",
    type=click.Choice(("stage", "service", "operation")),
    default="stage",
    show_default=True,
)
_jaeger_option = click.option(
    "--jaeger-url",
    default="http://localhost:16686",
    show_default=True,
    envvar="HOPTRACE_JAEGER_URL",
    help="Jaeger UI base URL for the trace links of the HTML report.",
)


def _format_option(func: Callable[..., Any]) -> Callable[..., Any]:
    func = _jaeger_option(func)
    func = click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to FILE.")(
        func
    )
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default="table",
        show_default=True,
        help="html: one self-contained page (charts, waterfalls); best with -o.",
    )(func)


def _render(
    fmt: str,
    output: str | None,
    as_json: Callable[[], Any],
    sections: Callable[[], Any],
    report: Callable[[], Any],
) -> None:
    from tracer.analysis import render

    if fmt == "json":
        _emit(render.dumps(as_json()), output)
    elif fmt == "markdown":
        _emit(render.to_markdown(sections()), output)
    elif fmt == "html":
        _emit(render.to_html(report()), output)
    else:
        _emit(render.to_table(sections()), output)


def _source_label(sources: tuple[str, ...]) -> str:
    return ", ".join(sources) if sources else "the default span store"


@main.command()
@click.argument("sources", nargs=-1)
@_group_by_option
@click.option(
    "--price",
    multiple=True,
    metavar="MODEL=IN:OUT",
    help="Price per 1,000 input and output tokens; MODEL may be '*'.",
)
@_format_option
@_source_options
def analyze(
    sources: tuple[str, ...],
    group_by: str,
    price: tuple[str, ...],
    fmt: str,
    output: str | None,
    jaeger_url: str,
    selection: _Selection,
) -> None:
    """Attribute each trace's time to stages along its critical path and aggregate.

    SOURCES: span store files, OTLP JSON or Jaeger JSON files, folders, or a Jaeger
    URL (http://host:16686); the default span store when none is given.
    """
    from tracer.analysis import analyze as run
    from tracer.analysis import render

    prices = _parse_prices(price)
    smap = selection.stage_map()
    result = None
    if fmt != "html" and selection.limit is None:
        result = _analyze_big_files(sources, group_by, smap, selection)
    if result is None:
        with _busy(sources, "reading and attributing traces"):
            traces = selection.load(sources)
            result = run(traces, group_by, smap)
    _render(
        fmt,
        output,
        lambda: render.analysis_dict(result, prices),
        lambda: render.analysis_sections(result, prices),
        lambda: _report_of(result, traces, smap, sources, jaeger_url),
    )


@main.command()
@click.argument("sources", nargs=-1)
@click.option("--stage", required=True, help="The stage that gets faster, e.g. inference.")
@click.option("--speedup", required=True, type=float, help="How many times faster, e.g. 100.")
@_format_option
@_source_options
def whatif(
    sources: tuple[str, ...],
    stage: str,
    speedup: float,
    fmt: str,
    output: str | None,
    jaeger_url: str,
    selection: _Selection,
) -> None:
    """Project "STAGE becomes K times faster" onto the real traces."""
    from tracer.analysis import render, what_if

    smap = selection.stage_map()
    with _busy(sources, "reading and retiming traces"):
        traces = selection.load(sources)
        result = what_if(traces, stage, speedup, smap)
    _render(
        fmt,
        output,
        lambda: render.whatif_dict(result),
        lambda: render.whatif_sections(result),
        lambda: _full_report(traces, smap, sources, jaeger_url, whatif=result),
    )


@main.command()
@click.argument("baseline")
@click.argument("candidate")
@_group_by_option
@_format_option
@click.option("--stage-map", type=click.Path(dir_okay=False))
def compare(
    baseline: str,
    candidate: str,
    group_by: str,
    fmt: str,
    output: str | None,
    jaeger_url: str,
    stage_map: str | None,
) -> None:
    """Compare a BASELINE run with a CANDIDATE run, stage by stage."""
    from tracer.analysis import analyze as run
    from tracer.analysis import compare as diff
    from tracer.analysis import load, render

    smap = _stage_map(stage_map)
    with _busy((baseline, candidate), "reading and attributing both runs"):
        everything = _Selection()
        before = _analyze_big_files((baseline,), group_by, smap, everything)
        if before is None:
            before = run(load([baseline]), group_by, smap)
        after = (
            None if fmt == "html" else _analyze_big_files((candidate,), group_by, smap, everything)
        )
        candidate_traces = None
        if after is None:  # the HTML page draws the candidate's exemplar traces
            candidate_traces = load([candidate])
            after = run(candidate_traces, group_by, smap)
        result = diff(before, after)
    _render(
        fmt,
        output,
        lambda: render.comparison_dict(result),
        lambda: render.comparison_sections(result),
        lambda: render.Report(
            title=f"{candidate} against {baseline}",
            source=f"baseline {baseline}, candidate {candidate}",
            analysis=after,
            comparison=result,
            waterfalls=render.exemplar_waterfalls(after, candidate_traces, smap)
            if candidate_traces is not None
            else [],
            jaeger_url=jaeger_url,
        ),
    )


def _full_report(
    traces: Any,
    smap: Any,
    sources: tuple[str, ...],
    jaeger_url: str,
    group_by: str = "stage",
    **views: Any,
) -> Any:
    from tracer.analysis import analyze as run

    return _report_of(run(traces, group_by, smap), traces, smap, sources, jaeger_url, **views)


def _report_of(
    result: Any,
    traces: Any,
    smap: Any,
    sources: tuple[str, ...],
    jaeger_url: str,
    **views: Any,
) -> Any:
    from tracer.analysis import render

    return render.Report(
        title=f"Where the time goes: {result.traces} traces",
        source=_source_label(sources),
        analysis=result,
        waterfalls=render.exemplar_waterfalls(result, traces, smap),
        jaeger_url=jaeger_url,
        **views,
    )


@main.command()
@click.argument("sources", nargs=-1)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default="report.html",
    show_default=True,
    help="The HTML file to write.",
)
@_group_by_option
@click.option("--stage", "whatif_stage", help="Add the what-if view for this stage.")
@click.option("--speedup", type=float, help="With --stage: how many times faster.")
@click.option(
    "--baseline",
    help="Add the compare view: SOURCES are the candidate, this is the baseline.",
)
@_jaeger_option
@_source_options
def report(
    sources: tuple[str, ...],
    output: str,
    group_by: str,
    whatif_stage: str | None,
    speedup: float | None,
    baseline: str | None,
    jaeger_url: str,
    selection: _Selection,
) -> None:
    """Write one self-contained HTML report: share bars, percentiles, waterfalls.

    The page works offline (no scripts, no fonts, no CDN); the P50 and P90 exemplar
    traces link to Jaeger at --jaeger-url.
    """
    from tracer.analysis import analyze as run
    from tracer.analysis import compare as diff
    from tracer.analysis import load, render, what_if

    if (whatif_stage is None) != (speedup is None):
        raise ConfigError("--stage and --speedup go together")
    smap = selection.stage_map()
    with _busy(sources, "reading and attributing traces"):
        traces = selection.load(sources)
        views: dict[str, Any] = {}
        if whatif_stage is not None and speedup is not None:
            views["whatif"] = what_if(traces, whatif_stage, speedup, smap)
        if baseline is not None:
            views["comparison"] = diff(
                run(load([baseline]), group_by, smap), run(traces, group_by, smap)
            )
        page = render.to_html(_full_report(traces, smap, sources, jaeger_url, group_by, **views))
    _emit(page, output)


@main.command()
@click.argument("sources", nargs=-1)
@click.option(
    "--budget",
    required=True,
    type=click.Path(dir_okay=False),
    help="TOML file of limits: [e2e], [ttft], [stage.NAME] with p50_ms, p90_ms, p99_ms, "
    "share_max, tail_share_max.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(("text", "json")),
    default="text",
    show_default=True,
)
@_source_options
def check(
    sources: tuple[str, ...],
    budget: str,
    fmt: str,
    selection: _Selection,
) -> None:
    """Check the traces against a latency budget; exit 1 when any limit is exceeded.

    Prints one PASS or FAIL line per limit with the measured value, for CI after a
    load test: hoptrace check spans.db --budget budget.toml
    """
    from tracer.analysis import analyze as run
    from tracer.analysis import render
    from tracer.analysis.budget import check_budget, load_budget

    limits = load_budget(budget)
    result = run(selection.load(sources), "stage", selection.stage_map())
    verdicts = check_budget(result, limits)
    failed = [v for v in verdicts if not v.passed]
    if fmt == "json":
        click.echo(
            render.dumps(
                {
                    "traces": result.traces,
                    "passed": not failed,
                    "checks": [
                        {
                            "scope": v.scope,
                            "key": v.key,
                            "limit": v.limit,
                            "measured": round(v.measured, 4),
                            "passed": v.passed,
                        }
                        for v in verdicts
                    ],
                }
            ).rstrip("\n")
        )
    else:
        width = max(len(f"{v.scope} {v.key}") for v in verdicts)
        for v in verdicts:
            share = v.key in ("share_max", "tail_share_max")
            shown = f"{v.measured:.3f}" if share else f"{v.measured:,.1f} ms"
            bound = f"{v.limit:g}" if share else f"{v.limit:,.1f} ms"
            sign = "<=" if v.passed else ">"
            click.echo(
                f"{'PASS' if v.passed else 'FAIL'}  {f'{v.scope} {v.key}':<{width}}  "
                f"{shown} {sign} {bound}"
            )
        click.echo(
            f"{len(verdicts) - len(failed)} of {len(verdicts)} limits met over "
            f"{result.traces} traces" + (f"; {len(failed)} exceeded" if failed else "")
        )
    if failed:
        sys.exit(1)


@main.command()
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind; loopback unless you mean to expose it.",
)
@click.option("--port", default=4318, show_default=True, type=int)
@store_option
@click.option(
    "--max-body-bytes",
    type=int,
    default=16 * 1024 * 1024,
    show_default=True,
    help="Largest request body, before and after gzip.",
)
@click.option(
    "--token",
    envvar="HOPTRACE_COLLECTOR_TOKEN",
    help="Require 'Authorization: Bearer TOKEN' [env: HOPTRACE_COLLECTOR_TOKEN].",
)
def collect(
    host: str, port: int, store: str | None, max_body_bytes: int, token: str | None
) -> None:
    """Run the embedded OTLP/HTTP receiver (POST /v1/traces) into a span store."""
    from collector import default_store_path, serve

    if not 0 < port < 65536:
        raise ConfigError(f"--port must be 1..65535, got {port!r}")
    path = Path(store) if store else default_store_path()
    click.echo(
        f"hoptrace collector: OTLP/HTTP on http://{host}:{port}/v1/traces -> {path}\n"
        f"  point exporters at it: OTEL_EXPORTER_OTLP_ENDPOINT=http://{host}:{port}\n"
        "  Ctrl-C to stop",
        err=True,
    )
    serve(path, host=host, port=port, max_body_bytes=max_body_bytes, token=token)


def _register_more() -> None:
    from tracer import _cli_bench, _cli_demo

    _cli_bench.register(main)
    _cli_demo.register(main)


_register_more()

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
