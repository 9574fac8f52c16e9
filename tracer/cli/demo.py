"""``hoptrace demo`` and ``hoptrace serve``: the demo chain from the command line."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from tracer.cli._common import (
    count,
    emit,
    finite_positive,
    jaeger_option,
    positive_count,
    store_option,
)

__all__ = ["COMMANDS"]

#: The latency profiles (demo_app/profiles.py), as --profile's help lists them.
_PROFILE_HELP = (
    "Latency the services add, since loopback has almost none: wan (a client far from "
    "the gateway, about 600 ms outside the model; the default), lan, rag (lan whose "
    "context assembly runs retrieval and keyword search in parallel), loopback (nothing "
    "added) or bare (no model time either); NAME,STAGE=K makes STAGE K times faster "
    "(wan,inference=100; rag,context.retrieval=4)."
)


def _profile(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """--profile's callback: an unknown profile is one line before anything starts."""
    from demo_app.profiles import get_profile
    from tracer._errors import ConfigError

    try:
        get_profile(value)
    except ConfigError as exc:
        raise ConfigError(f"--profile: {exc}") from None
    return value


@click.command()
@click.option(
    "--requests",
    default=40,
    show_default=True,
    callback=positive_count,
    help="Measured requests per run.",
)
@click.option(
    "--warmup",
    default=8,
    show_default=True,
    callback=count,
    help="Warm-up requests per run.",
)
@click.option(
    "--concurrency",
    default=8,
    show_default=True,
    callback=positive_count,
    help="Requests in flight at once (clients in a closed loop).",
)
@click.option(
    "--speedup",
    default=100.0,
    show_default=True,
    callback=finite_positive,
    help="How many times faster the candidate model is.",
)
@click.option("--profile", default="wan", show_default=True, callback=_profile, help=_PROFILE_HELP)
@click.option(
    "--stream/--no-stream",
    default=True,
    show_default=True,
    help="Stream the answers (server-sent events, a time to first token) or not.",
)
@store_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(("table", "markdown", "json", "html")),
    default="table",
    show_default=True,
    help="html: one page with both runs, the projection and the waterfalls (use -o).",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to FILE.")
@click.option(
    "--overhead/--no-overhead",
    default=True,
    show_default=True,
    help="Also measure what tracing costs (traced vs untraced loopback copies, ~10 s).",
)
@jaeger_option
def demo(
    requests: int,
    warmup: int,
    concurrency: int,
    speedup: float,
    profile: str,
    stream: bool,
    store: str | None,
    fmt: str,
    output: str | None,
    overhead: bool,
    jaeger_url: str,
) -> None:
    """Run the traced demo chain twice (model as is, then K times faster) and show
    where the speedup went."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from collector import default_store_path
    from demo_app.chain import stop_on_signals
    from demo_app.report import demo_dict, demo_page, demo_sections
    from demo_app.run import run_demo
    from tracer.analysis import render

    err = Console(stderr=True)
    tasks: dict[str, Any] = {}
    with (
        stop_on_signals(),
        Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            console=err,
            transient=False,
        ) as progress,
    ):

        def show(event: str, run: str, done: int, total: int) -> None:
            if event == "start":
                tasks[run] = progress.add_task(run, total=total)
            elif event == "advance":
                progress.advance(tasks[run], done)
            else:
                progress.console.print(run)

        result = run_demo(
            Path(store) if store else default_store_path(),
            requests=requests,
            warmup=warmup,
            concurrency=concurrency,
            speedup=speedup,
            profile=profile,
            stream=stream,
            progress=show,
            overhead=overhead,
        )
    if fmt == "json":
        emit(render.dumps(demo_dict(result)), output)
    elif fmt == "html":
        emit(render.to_html(demo_page(result, jaeger_url)), output)
    else:
        sections = demo_sections(result, jaeger_url)
        text = render.to_markdown(sections) if fmt == "markdown" else render.to_table(sections)
        emit(text, output)


@click.command()
@click.option(
    "--port", default=8000, show_default=True, type=click.IntRange(1, 65535), help="Gateway port."
)
@click.option(
    "--otlp-port",
    default=4318,
    show_default=True,
    type=click.IntRange(1, 65535),
    help="Port of the collector the chain sends its spans to (OTLP/HTTP).",
)
@click.option(
    "--api-key",
    default="hoptrace-demo-key",
    show_default=True,
    help="The key the gateway accepts (Authorization: Bearer KEY).",
)
@click.option("--rate-limit", default=0.0, help="Requests per second per key (burst = RPS).")
@click.option(
    "--speedup",
    default=1.0,
    show_default=True,
    callback=finite_positive,
    help="How many times faster the simulated model is.",
)
@click.option("--profile", default="wan", show_default=True, callback=_profile, help=_PROFILE_HELP)
@store_option
@click.option(
    "--max-concurrency",
    default=0,
    show_default=True,
    help="Gateway worker pool size (0: unlimited); small pools show a knee in bench.",
)
@click.option(
    "--upstream",
    help="An OpenAI-compatible base URL to use instead of the "
    "simulated model (vLLM, llama.cpp, Ollama), e.g. http://127.0.0.1:8080/v1",
)
@click.option(
    "--live-metrics/--no-live-metrics",
    default=True,
    show_default=True,
    help="Attribute traces as they complete and serve GET /metrics (Prometheus) and "
    "GET /live (hoptrace top) on the collector's port.",
)
def serve(
    port: int,
    otlp_port: int,
    api_key: str,
    rate_limit: float,
    speedup: float,
    profile: str,
    store: str | None,
    max_concurrency: int,
    upstream: str | None,
    live_metrics: bool,
) -> None:
    """Start the traced chain and the collector, and stay up until Ctrl-C."""
    from collector import default_store_path
    from demo_app.chain import Chain, stop_on_signals
    from tracer.sdk.setup import prefer_prompt_export

    store_path = Path(store) if store else default_store_path()
    prefer_prompt_export()
    chain = Chain(
        store_path,
        profile=profile,
        speedup=speedup,
        api_key=api_key,
        rate_limit=rate_limit,
        otlp_port=otlp_port,
        upstream=upstream,
        max_concurrency=max_concurrency,
        live_metrics=live_metrics,
    )
    chain.use_port("gateway", port)
    with stop_on_signals(), chain:
        click.echo(
            f"OpenAI base URL:  {chain.base_url}\nAPI key:          {api_key}\n"
            f"OTLP collector:   {chain.collector.endpoint} (store {store_path})\n"
            + (
                f"Live metrics:     {chain.collector.endpoint}/metrics (hoptrace top "
                f"--collector {chain.collector.endpoint})\n"
                if live_metrics
                else ""
            )
            + "Ctrl-C to stop",
            err=True,
        )
        try:
            while True:
                time.sleep(3600)
        except (KeyboardInterrupt, SystemExit):
            click.echo("stopping", err=True)


COMMANDS = (demo, serve)
