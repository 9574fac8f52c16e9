"""``hoptrace bench``: the careful benchmark from the command line."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

import click

from tracer._errors import ConfigError
from tracer.cli._common import busy, format_option, positive_count, render_as

__all__ = ["COMMANDS"]

ITL_HELP = (
    "Inter-chunk latency (ITL) is the gap between consecutive content chunks of a "
    "stream, after the first chunk, pooled over the level's successful requests; with "
    "one token per chunk it is the inter-token latency."
)


def _levels(text: str) -> list[int]:
    try:
        return sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ConfigError(
            f"--concurrency must be positive integers separated by commas, got {text!r}"
        ) from None


def _tracing_reachable() -> str | None:
    """The OTLP traces endpoint when something answers there, else None."""
    import httpx

    from tracer.sdk.setup import traces_endpoint

    endpoint = traces_endpoint(None, "http/protobuf")
    try:
        httpx.post(
            endpoint,
            content=b"",
            headers={"content-type": "application/x-protobuf"},
            timeout=2.0,
        )
    except httpx.HTTPError:
        return None
    return endpoint


def _knee_ids(result: Any) -> tuple[set[str], set[str]]:
    """Trace ids of the lowest level and of the knee's level."""
    base = result.levels[0]
    knee = next(lv for lv in result.levels if lv.concurrency == result.knee.concurrency)
    return {s.trace_id for s in base.ok}, {s.trace_id for s in knee.ok}


def _traces_of(result: Any, source: str, wait_s: float, since_s: float, everything: bool) -> Any:
    """The bench's traces from ``source``: all measured ones, or the knee's two levels
    (from a Jaeger or Tempo URL: fetched by id); None when ``source`` cannot be read."""
    from rich.console import Console

    from tracer._errors import SourceError
    from tracer.analysis.loaders.arrival import wait_for_traces

    if everything or result.knee is None:
        wanted = {s.trace_id for lv in result.levels for s in lv.ok}
    else:
        base, knee = _knee_ids(result)
        wanted = base | knee
    Console(stderr=True).print(f"waiting for {len(wanted)} traces in {source}")
    try:
        with busy((source,), f"waiting for {len(wanted)} traces") as notices:
            traces, partial = wait_for_traces(
                source,
                wanted,
                deadline_s=wait_s,
                since_s=since_s,
                min_services=2,  # the bench's client and the server it called
                listener=notices,
            )
    except SourceError as exc:
        result.notes.append(f"the traces were not read: {exc}")
        return None
    missing = len(wanted) - len(traces.traces)
    if missing:
        result.notes.append(f"{missing} of {len(wanted)} traces were not found in {source}")
    if partial:
        result.notes.append(
            f"{partial} traces were still incomplete after {wait_s:g} s (--traces-wait); "
            "their missing spans count as time of the spans above them"
        )
    return traces


def _name_knee_stage(result: Any, traces: Any) -> None:
    """Put the stage that grew most between the lowest level and the knee on the knee."""
    from tracer.bench import stage_growth

    if traces is None:
        result.notes.append("the stage that grew is named when the traces are reachable (--traces)")
        return
    base_ids, knee_ids = _knee_ids(result)
    grown = stage_growth(traces, base_ids, knee_ids)
    if grown is None:
        result.notes.append("no usable traces of the knee's levels: the stage that grew is unknown")
        return
    result.knee = dataclasses.replace(result.knee, stage=grown[0], stage_growth_ms=grown[1])
    result.notes.append(
        f"{grown[0]} grew by {grown[1]:,.1f} ms per request (mean) from concurrency "
        f"{result.levels[0].concurrency} to {result.knee.concurrency}"
    )


def _open_loop(
    rate: str | None, arrivals: str, burstiness: float, max_concurrency: int | None
) -> tuple[list[float] | None, Any]:
    """``--rate`` and its options as rates and an arrival process (None: a closed
    loop); the open-loop options without ``--rate``, or with ``--concurrency``, are
    refused in one line."""
    from tracer.bench.openloop import Arrivals, parse_rates

    ctx = click.get_current_context()

    def given(name: str) -> bool:
        return ctx.get_parameter_source(name) not in (click.core.ParameterSource.DEFAULT, None)

    if rate is None:
        extra = [
            f"--{n.replace('_', '-')}"
            for n in ("arrivals", "burstiness", "max_concurrency", "seed")
            if given(n)
        ]
        if extra:
            raise ConfigError(f"{', '.join(extra)} shape an open loop: add --rate R[,R...]")
        return None, None
    if given("concurrency"):
        raise ConfigError(
            "--rate (an open loop) and --concurrency (a closed loop) choose the load two "
            "ways: give one"
        )
    return parse_rates(rate), Arrivals(arrivals, burstiness)


@click.command(epilog=ITL_HELP)
@click.argument("url")
@click.option("--api-key", envvar="OPENAI_API_KEY", help="Bearer key [env: OPENAI_API_KEY].")
@click.option("--requests", default=32, show_default=True, help="Measured requests per level.")
@click.option(
    "--warmup",
    default=4,
    show_default=True,
    help="Warm-up requests per level (at least the level's concurrency; 0: none).",
)
@click.option(
    "--concurrency",
    default="1,2,4,8",
    show_default=True,
    help="Concurrency levels, comma-separated.",
)
@click.option(
    "--rate",
    metavar="R[,R...]",
    help="Open loop instead of --concurrency: send requests at each of these rates "
    "(requests/s) whether or not earlier ones were answered, as production traffic "
    "arrives; latency is also measured from each request's intended send time.",
)
@click.option(
    "--arrivals",
    type=click.Choice(["poisson", "constant", "gamma"]),
    default="poisson",
    show_default=True,
    help="With --rate: the arrival process (gamma takes --burstiness).",
)
@click.option(
    "--burstiness",
    type=float,
    default=1.0,
    show_default=True,
    help="With --arrivals gamma: the gamma shape (1: Poisson; below 1 burstier, above 1 steadier).",
)
@click.option(
    "--max-concurrency",
    type=int,
    callback=positive_count,
    help="With --rate: at most this many requests in flight; a request whose time has "
    "come waits for a slot, and its queue time is reported [default: no cap].",
)
@click.option("--seed", default=1, show_default=True, help="With --rate: the schedule's seed.")
@click.option("--max-tokens", default=64, show_default=True, help="Fixed max_tokens.")
@click.option("--prompt", help="The fixed prompt [default: a short explanation request].")
@click.option(
    "--model",
    default="default",
    show_default=True,
    help="The model name sent (vLLM and hosted APIs want the served model's name).",
)
@click.option(
    "--stream/--no-stream",
    default=True,
    show_default=True,
    help="Ask for a streamed answer (time to first chunk, inter-chunk latency) or a whole one.",
)
@click.option("--timeout", default=60.0, show_default=True, help="Per-request timeout (s).")
@click.option(
    "--max-answer-bytes",
    default="16MiB",
    show_default=True,
    metavar="SIZE",
    help="Largest answer read per request, after decompression; past it the request "
    "fails as too_large.",
)
@click.option(
    "--traces",
    "traces_source",
    help="Where the server's spans land (span store, Jaeger or Tempo URL), to name the "
    "stage that grew at the knee [default: the default span store, if it exists].",
)
@click.option(
    "--traces-wait",
    default=15.0,
    show_default=True,
    help="Seconds to wait for the traces to arrive.",
)
@click.option(
    "--slo",
    metavar="METRIC=LIMIT[,...]",
    help="Limits every request must meet, in ms or s: ttft, tpot, itl, e2e (e.g. "
    "ttft=200ms,e2e=2s; analyze and whatif take ttft and e2e); adds goodput and SLO "
    "attainment per level.",
)
@click.option(
    "--slo-attainment",
    default=0.9,
    show_default=True,
    help="With --slo: the fraction of a level's requests that must meet it for the level "
    "to meet the SLO.",
)
@format_option
def bench(
    url: str,
    api_key: str | None,
    requests: int,
    warmup: int,
    concurrency: str,
    rate: str | None,
    arrivals: str,
    burstiness: float,
    max_concurrency: int | None,
    seed: int,
    max_tokens: int,
    prompt: str | None,
    model: str,
    stream: bool,
    timeout: float,
    max_answer_bytes: str,
    traces_source: str | None,
    traces_wait: float,
    slo: str | None,
    slo_attainment: float,
    fmt: str,
    output: str | None,
    jaeger_url: str,
) -> None:
    """Benchmark an OpenAI-compatible endpoint: warm-up, fixed max_tokens,
    concurrency sweep, P50/P90/P99, TTFC, ITL, tokens/s, goodput with --slo, and the
    knee.

    URL is an OpenAI-style base URL (http://host:port/v1). Every request is a traced
    client span (context propagated) sent to OTEL_EXPORTER_OTLP_ENDPOINT.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    import tracer
    from collector import default_store_path
    from collector.memory import parse_size
    from tracer.analysis import analyze, exemplar_waterfalls, render
    from tracer.analysis.checks.slo import parse_slo
    from tracer.analysis.checks.sweep import check_slo
    from tracer.bench import DEFAULT_PROMPT, check_arguments, run_bench
    from tracer.sdk.setup import prefer_prompt_export

    levels = _levels(concurrency)
    check_arguments(url, levels, requests, warmup, max_tokens, timeout)
    rates, process = _open_loop(rate, arrivals, burstiness, max_concurrency)
    answer_limit = parse_size(max_answer_bytes, "--max-answer-bytes")
    if answer_limit <= 0:
        raise ConfigError(f"--max-answer-bytes must be positive, got {max_answer_bytes!r}")
    limits = parse_slo(slo) if slo is not None else None
    check_slo(limits, stream, slo_attainment)
    err = Console(stderr=True)
    notes: list[str] = []
    ours = False
    if not tracer.is_configured():
        endpoint = _tracing_reachable()
        if endpoint is None:
            notes.append("requests were not traced: no OTLP receiver answered")
            err.print(
                "hoptrace: note: no OTLP receiver answers at OTEL_EXPORTER_OTLP_ENDPOINT "
                "(default http://127.0.0.1:4318); the requests are not traced"
            )
        else:
            prefer_prompt_export()
            tracer.setup(service_name=os.environ.get("OTEL_SERVICE_NAME") or "client")
            ours = True
    # The measured requests of a closed loop (its warm-up ones only name the phase).
    total = len(rates) * (warmup + requests) if rates else requests * len(levels)
    started = time.monotonic()
    try:
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            console=err,
        ) as progress:
            task = progress.add_task("bench", total=total)
            result = run_bench(
                url,
                api_key=api_key,
                levels=levels,
                requests=requests,
                warmup=warmup,
                max_tokens=max_tokens,
                prompt=prompt or DEFAULT_PROMPT,
                model=model,
                stream=stream,
                timeout_s=timeout,
                max_answer_bytes=answer_limit,
                progress=lambda label, n: progress.update(task, advance=n, description=label),
                slo=limits,
                slo_attainment=slo_attainment,
                rates=rates,
                arrivals=process,
                max_concurrency=max_concurrency,
                seed=seed,
            )
    finally:
        if ours:
            tracer.force_flush(2_000)  # bounded: the collector may have gone mid-run
    result.notes.extend(notes)
    source = traces_source
    if source is None and ours and default_store_path().exists():
        source = str(default_store_path())
    traces = None
    if source and (result.knee is not None or fmt == "html"):
        since_s = time.monotonic() - started + 60  # the sweep, and clocks a bit apart
        traces = _traces_of(result, source, traces_wait, since_s, fmt == "html")
    try:
        if result.knee is not None:
            _name_knee_stage(result, traces)
    finally:
        if ours:
            tracer.shutdown()

    def report() -> Any:
        analysis = None
        waterfalls: list[Any] = []
        if traces is not None and traces.traces:
            analysis = analyze(traces)
            waterfalls = exemplar_waterfalls(analysis, traces)
        return render.Report(
            title=f"Benchmark of {url}",
            source=f"run {result.run}",
            analysis=analysis,
            bench=result,
            waterfalls=waterfalls,
            jaeger_url=jaeger_url,
        )

    render_as(
        fmt,
        output,
        lambda: render.bench_dict(result),
        lambda: render.bench_sections(result),
        report,
    )
    if not any(level.ok for level in result.levels):
        # The table above shows the failures; the exit status tells a script.
        failures = sorted({s.status for level in result.levels for s in level.samples})
        click.echo(
            "hoptrace: error: no measured request succeeded "
            f"({', '.join(failures) or 'no requests'}); see the errors above",
            err=True,
        )
        raise SystemExit(1)


COMMANDS = (bench,)
