"""The ``hoptrace`` command line.

Every user mistake is one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from tracer._errors import ConfigError, HoptraceError

__all__ = ["main"]

FORMATS = ("table", "json", "markdown")


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


def _source_options(func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(
        [
            click.option("--service", help="Keep traces that contain a span of this service."),
            click.option("--operation", help="Keep traces that contain a span of this operation."),
            click.option("--limit", type=int, help="Keep the most recent N traces."),
            click.option(
                "--since", help="Keep traces that started within this time (15m, 2h, 1d)."
            ),
            click.option(
                "--stage-map",
                type=click.Path(dir_okay=False),
                help="TOML file mapping service/operation patterns to stages.",
            ),
        ]
    ):
        func = option(func)
    return func


def _load(
    sources: tuple[str, ...],
    service: str | None,
    operation: str | None,
    limit: int | None,
    since: str | None,
) -> Any:
    from tracer.analysis import load

    return load(list(sources), service=service, operation=operation, limit=limit, since=since)


def _stage_map(path: str | None) -> Any:
    if not path:
        return None
    from tracer.analysis import load_stage_map

    return load_stage_map(path)


def _format_option(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to FILE.")(
        func
    )
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default="table",
        show_default=True,
    )(func)


@main.command()
@click.argument("sources", nargs=-1)
@click.option(
    "--group-by",
    type=click.Choice(("stage", "service", "operation")),
    default="stage",
    show_default=True,
)
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
    service: str | None,
    operation: str | None,
    limit: int | None,
    since: str | None,
    stage_map: str | None,
) -> None:
    """Attribute each trace's time to stages along its critical path and aggregate.

    SOURCES: span store files, OTLP JSON or Jaeger JSON files, folders, or a Jaeger
    URL (http://host:16686); the default span store when none is given.
    """
    from tracer.analysis import analyze as run
    from tracer.analysis import render

    prices = _parse_prices(price)
    result = run(_load(sources, service, operation, limit, since), group_by, _stage_map(stage_map))
    if fmt == "json":
        _emit(render.dumps(render.analysis_dict(result, prices)), output)
    elif fmt == "markdown":
        _emit(render.to_markdown(render.analysis_sections(result, prices)), output)
    else:
        _emit(render.to_table(render.analysis_sections(result, prices)), output)


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
    service: str | None,
    operation: str | None,
    limit: int | None,
    since: str | None,
    stage_map: str | None,
) -> None:
    """Project "STAGE becomes K times faster" onto the real traces."""
    from tracer.analysis import render, what_if

    result = what_if(
        _load(sources, service, operation, limit, since), stage, speedup, _stage_map(stage_map)
    )
    if fmt == "json":
        _emit(render.dumps(render.whatif_dict(result)), output)
    elif fmt == "markdown":
        _emit(render.to_markdown(render.whatif_sections(result)), output)
    else:
        _emit(render.to_table(render.whatif_sections(result)), output)


@main.command()
@click.argument("baseline")
@click.argument("candidate")
@click.option(
    "--group-by",
    type=click.Choice(("stage", "service", "operation")),
    default="stage",
    show_default=True,
)
@_format_option
@click.option("--stage-map", type=click.Path(dir_okay=False))
def compare(
    baseline: str,
    candidate: str,
    group_by: str,
    fmt: str,
    output: str | None,
    stage_map: str | None,
) -> None:
    """Compare a BASELINE run with a CANDIDATE run, stage by stage."""
    from tracer.analysis import analyze as run
    from tracer.analysis import compare as diff
    from tracer.analysis import load, render

    smap = _stage_map(stage_map)
    result = diff(run(load([baseline]), group_by, smap), run(load([candidate]), group_by, smap))
    if fmt == "json":
        _emit(render.dumps(render.comparison_dict(result)), output)
    elif fmt == "markdown":
        _emit(render.to_markdown(render.comparison_sections(result)), output)
    else:
        _emit(render.to_table(render.comparison_sections(result)), output)


@main.command()
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind; loopback unless you mean to expose it.",
)
@click.option("--port", default=4318, show_default=True, type=int)
@click.option(
    "--store",
    type=click.Path(dir_okay=False),
    help="Span store file [default: $HOPTRACE_STORE or ~/.local/share/hoptrace/spans.db].",
)
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


def _register_optional() -> None:
    # Commands whose modules pull in the demo services load lazily.
    try:
        from tracer import _cli_demo
    except ImportError:  # pragma: no cover - the demo is part of the distribution
        return
    _cli_demo.register(main)


_register_optional()

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
