"""The analysis commands: ``analyze``, ``whatif``, ``compare``, ``report``, ``check``."""

from __future__ import annotations

import sys
from typing import Any

import click

from tracer._errors import ConfigError, HoptraceError
from tracer.cli._common import (
    Selection,
    answer_whatif,
    busy,
    calls_options,
    calls_plan,
    check_format_option,
    emit,
    format_option,
    group_by_option,
    jaeger_option,
    load_options,
    load_question,
    no_match,
    parse_prices,
    price_option,
    render_as,
    source_label,
    source_options,
    split_option,
    trace_links,
)

__all__ = ["COMMANDS"]


def _byte_progress() -> Any:
    """A byte bar on stderr for the parallel path (terminals only), as a context."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )


def _analyze(
    sources: tuple[str, ...],
    query: Any,
    what: str = "reading and attributing traces",
    note: bool = True,
) -> tuple[Any, Any]:
    """Analysis and (when kept) traces of the sources, as ``query`` asks, with
    progress. With ``note``, no ``--run`` and no ``--split-by`` (which shows each value
    on its own), says on stderr when the traces mix several runs (each trace's run
    kept as its split value, so it costs no second pass)."""
    from tracer.analysis import analyze_sources
    from tracer.analysis.runs import RUN, mixed_runs_note

    noting = note and query.run is None and query.split_by is None
    if noting:
        query = query.but(split_by=RUN)

    with busy(sources, what) as notices, _byte_progress() as bar:
        task = bar.add_task("reading", total=None)

        def show(phase: str, done: int, total: int) -> None:
            if phase == "reading":
                bar.update(task, completed=done, total=total)
            elif phase == "fetching":  # traces fetched from a backend by Dask workers
                notices.fetched(done, total)
            else:
                bar.update(task, description="attributing traces")

        try:
            result = analyze_sources(sources, query, progress=show, listener=notices)
        except HoptraceError as exc:
            raise no_match(query, exc) from None
    if noting and (line := mixed_runs_note(result[0])):
        click.echo(line, err=True)
    return result


def _waterfalls(result: Any, traces: Any, query: Any, sources: Any, w: Any = None) -> Any:
    """The exemplar waterfalls (and with the what-if ``w``, the P50 one projected); when
    the analysis streamed (no traces kept), the exemplar traces are read again."""
    from tracer.analysis import exemplar_traces, exemplar_waterfalls

    if traces is None:
        traces = exemplar_traces(sources, result, query)
    # The projected waterfall retimes the stage faster; a change with calls has none.
    projected = (w.stage, w.speedup) if w is not None and not w.calls else None
    return exemplar_waterfalls(result, traces, query.stage_map, projected)


def _report(
    result: Any, traces: Any, query: Any, sources: tuple[str, ...], jaeger_url: str, **views: Any
) -> Any:
    from tracer.analysis import render

    return render.Report(
        title=f"Where the time goes: {result.traces} traces",
        source=source_label(sources),
        analysis=result,
        waterfalls=_waterfalls(result, traces, query, sources, views.get("whatif")),
        jaeger_url=jaeger_url,
        **views,
    )


def _split_analysis(result: Any, attribute: str | None, group_by: str) -> Any:
    """Each value's analysis, from an analysis attributed with ``split_by=attribute``."""
    from tracer.analysis.split import split_aggregate

    return None if attribute is None else split_aggregate(result, attribute, group_by)


@click.command()
@click.argument("sources", nargs=-1)
@group_by_option
@price_option
@click.option(
    "--slo",
    metavar="METRIC=LIMIT[,...]",
    help="Limits every request must meet, in ms or s: ttft, e2e (e.g. ttft=200ms,e2e=2s; "
    "traces carry no per-token times, so tpot and itl are bench's only); adds the share of "
    "traces that meet them and, per group, how much longer it took in the traces that miss.",
)
@split_option
@format_option
@source_options
def analyze(
    sources: tuple[str, ...],
    group_by: str,
    price: tuple[str, ...],
    slo: str | None,
    split_by: str | None,
    fmt: str,
    output: str | None,
    jaeger_url: str,
    selection: Selection,
) -> None:
    """Attribute each trace's time to stages along its critical path and aggregate.

    SOURCES: span store files, OTLP, Jaeger or Tempo JSON files, folders, or a Jaeger
    or Grafana Tempo URL (http://host:16686, http://host:3200); the default span store
    when none is given.
    """
    from tracer.analysis import render
    from tracer.analysis.checks.slo import TRACE_METRICS, parse_slo, slo_analysis

    prices = parse_prices(price)
    limits = None if slo is None else parse_slo(slo, metrics=TRACE_METRICS)
    if limits is not None and split_by is not None:
        raise ConfigError("--slo judges all the traces together: drop --split-by")
    query = selection.query(group_by=group_by, split_by=split_by)
    result, traces = _analyze(sources, query)
    jaeger_url = trace_links(jaeger_url, sources, traces)
    if limits is not None:
        judged = slo_analysis(result.columns, limits, group_by)
        render_as(
            fmt,
            output,
            lambda: {**render.analysis_dict(result, prices), "slo": render.slo_dict(judged)},
            lambda: [
                *render.analysis_sections(result, prices, jaeger_url=jaeger_url),
                *render.slo_sections(judged),
            ],
            lambda: _report(result, traces, query, sources, jaeger_url),
        )
        return
    if split_by is not None:
        parts = _split_analysis(result, split_by, group_by)
        render_as(
            fmt,
            output,
            lambda: render.split_analysis_dict(parts, prices=prices),
            lambda: render.split_analysis_sections(parts, prices=prices, jaeger_url=jaeger_url),
            lambda: _report(result, traces, query, sources, jaeger_url, split=parts),
        )
        return
    render_as(
        fmt,
        output,
        lambda: render.analysis_dict(result, prices),
        lambda: render.analysis_sections(result, prices, jaeger_url=jaeger_url),
        lambda: _report(result, traces, query, sources, jaeger_url),
    )


@click.command()
@click.argument("sources", nargs=-1)
@click.option("--stage", help="The stage that gets faster, e.g. inference.")
@click.option("--speedup", type=float, help="With --stage: how many times faster, e.g. 100.")
@calls_options
@load_options
@price_option
@split_option
@format_option
@source_options
def whatif(
    sources: tuple[str, ...],
    stage: str | None,
    speedup: float | None,
    repeat: tuple[str, ...],
    fanout: tuple[str, ...],
    model: str,
    slo: str | None,
    capacities: tuple[str, ...],
    cores: float | None,
    cpu_per_request_ms: float | None,
    price: tuple[str, ...],
    split_by: str | None,
    fmt: str,
    output: str | None,
    jaeger_url: str,
    selection: Selection,
) -> None:
    """Project "STAGE becomes K times faster" onto the real traces, and what the
    calls a faster stage affords do (--repeat, --fanout).

    STAGE covers its sub-stages: inference means inference and inference.queue,
    .prefill and .decode; inference.decode means only that one.
    """
    from tracer.analysis import render
    from tracer.analysis.split import split_whatif

    # A bad option fails before any trace is read.
    question = load_question(model, capacities, cores, cpu_per_request_ms, slo)
    prices = parse_prices(price)
    plan = calls_plan(stage, speedup, repeat, fanout, slo)
    if plan is None:
        raise ConfigError("give --stage and --speedup, --repeat or --fanout")
    if plan.search is not None and split_by is not None:
        raise ConfigError("=max searches all the traces together: drop --split-by")
    loaded = None
    if plan.needs_traces():
        loaded = selection.load(sources)
        plan = plan.ready(loaded, selection.stage_map())
    projection = plan.projection
    # Every trace is projected as it is attributed (no spans kept); the analysis by
    # stage comes with it for the page.
    query = selection.query(split_by=split_by, projection=projection)
    whole, traces = _analyze(sources, query, "reading and retiming traces")
    jaeger_url = trace_links(jaeger_url, sources, traces)
    # All traces first: a stage no trace has is the user's mistake, whatever the
    # split; the page shows this projection too.
    result = projection.result(whole.columns, whole.loaded, whole.tally)
    if split_by is not None:
        parts = split_whatif(whole, split_by, projection)
        render_as(
            fmt,
            output,
            lambda: render.split_whatif_dict(parts),
            lambda: render.split_whatif_sections(parts),
            lambda: _report(
                whole,
                traces,
                query,
                sources,
                jaeger_url,
                whatif=result,
                split=_split_analysis(whole, split_by, "stage"),
            ),
        )
        return
    result = answer_whatif(result, whole, plan, sources, selection, question, prices, loaded)
    render_as(
        fmt,
        output,
        lambda: render.whatif_dict(result),
        lambda: render.whatif_sections(result),
        lambda: _report(whole, traces, query, sources, jaeger_url, whatif=result),
    )


@click.command()
@click.argument("baseline")
@click.argument("candidate")
@group_by_option
@format_option
@click.option("--baseline-run", metavar="PATTERN", help="The baseline's run (as --run).")
@click.option("--candidate-run", metavar="PATTERN", help="The candidate's run (as --run).")
@price_option
@source_options
def compare(
    baseline: str,
    candidate: str,
    group_by: str,
    fmt: str,
    output: str | None,
    jaeger_url: str,
    baseline_run: str | None,
    candidate_run: str | None,
    price: tuple[str, ...],
    selection: Selection,
) -> None:
    """Compare a BASELINE run with a CANDIDATE run, stage by stage.

    Two runs of one source: give it twice, each side with its run. The source options
    select the traces of both sides.

    \b
      hoptrace compare demo.db demo.db --baseline-run '*:baseline' --candidate-run '*:candidate'
    """
    from tracer.analysis import compare as diff
    from tracer.analysis import render

    prices, query = parse_prices(price), selection.query(group_by=group_by)
    # One query for both sides: the same filters and source options, each side's run.
    candidates = query.but(run=candidate_run or query.run)
    before, _ = _analyze(
        (baseline,), query.but(run=baseline_run or query.run), "reading the baseline", False
    )
    after, candidate_traces = _analyze((candidate,), candidates, "reading the candidate", False)
    result = diff(before, after)
    render_as(
        fmt,
        output,
        lambda: render.comparison_dict(result),
        lambda: render.comparison_sections(result, prices),
        lambda: render.Report(
            title=f"{candidate} against {baseline}",
            source=f"baseline {baseline}, candidate {candidate}",
            analysis=after,
            comparison=result,
            # The candidate's exemplar traces, read again when it was streamed.
            waterfalls=_waterfalls(after, candidate_traces, candidates, (candidate,)),
            jaeger_url=jaeger_url,
            prices=prices,
        ),
    )


@click.command()
@click.argument("sources", nargs=-1)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default="report.html",
    show_default=True,
    help="The HTML file to write.",
)
@group_by_option
@click.option("--stage", "whatif_stage", help="Add the what-if view for this stage.")
@click.option("--speedup", type=float, help="With --stage: how many times faster.")
@click.option(
    "--baseline",
    help="Add the compare view: SOURCES are the candidate, this is the baseline.",
)
@calls_options
@load_options
@price_option
@split_option
@jaeger_option
@source_options
def report(
    sources: tuple[str, ...],
    output: str,
    group_by: str,
    whatif_stage: str | None,
    speedup: float | None,
    baseline: str | None,
    repeat: tuple[str, ...],
    fanout: tuple[str, ...],
    model: str,
    slo: str | None,
    capacities: tuple[str, ...],
    cores: float | None,
    cpu_per_request_ms: float | None,
    price: tuple[str, ...],
    split_by: str | None,
    jaeger_url: str,
    selection: Selection,
) -> None:
    """Write one self-contained HTML report: share bars, percentiles, waterfalls.

    The page works offline (no scripts, no fonts, no CDN); the P50 and P90 exemplar
    traces link to Jaeger at --jaeger-url. With --stage and --speedup, the what-if is
    answered as hoptrace whatif answers it (--model, --slo, --capacity alike).
    """
    from tracer.analysis import compare as diff
    from tracer.analysis import render

    question = load_question(model, capacities, cores, cpu_per_request_ms, slo)
    plan = calls_plan(whatif_stage, speedup, repeat, fanout, slo)
    loaded = None
    if plan is not None and plan.needs_traces():
        loaded = selection.load(sources)
        plan = plan.ready(loaded, selection.stage_map())
    projection = None if plan is None else plan.projection
    query = selection.query(group_by=group_by, split_by=split_by, projection=projection)
    result, traces = _analyze(sources, query)
    views: dict[str, Any] = {"prices": parse_prices(price)}
    if plan is not None:
        retimed = plan.projection.result(result.columns, result.loaded, result.tally)
        views["whatif"] = answer_whatif(
            retimed, result, plan, sources, selection, question, views["prices"], loaded
        )
    if baseline is not None:
        # The baseline is read the same way, without the candidate's filters.
        before, _ = _analyze((baseline,), query.sources_only, "reading the baseline", False)
        views["comparison"] = diff(before, result)
    views["split"] = _split_analysis(result, split_by, group_by)
    jaeger_url = trace_links(jaeger_url, sources, traces)
    page = render.to_html(_report(result, traces, query, sources, jaeger_url, **views))
    emit(page, output)


@click.command()
@click.argument("sources", nargs=-1)
@click.option(
    "--budget",
    required=True,
    type=click.Path(dir_okay=False),
    help="TOML file of limits: [e2e], [ttft], [stage.NAME] with p50_ms, p90_ms, p99_ms, "
    "share_max, tail_share_max.",
)
@check_format_option
@split_option
@source_options
def check(
    sources: tuple[str, ...],
    budget: str,
    fmt: str,
    split_by: str | None,
    selection: Selection,
) -> None:
    """Check the traces against a latency budget; exit 1 when any limit is exceeded.

    Prints one PASS or FAIL line per limit with the measured value, for CI after a
    load test: hoptrace check spans.db --budget budget.toml. From sampled traces, a
    limit inside a value's confidence interval is UNDECIDED (exit 3 if none failed).
    """
    from tracer.analysis import render
    from tracer.analysis.aggregate import aggregate_columns
    from tracer.analysis.checks.budget import check_budget, load_budget
    from tracer.analysis.split import split_analysis

    limits = load_budget(budget)
    # One streaming pass (bounded memory, every core); with --split-by each trace's
    # value is kept with its row.
    whole, _ = _analyze(sources, selection.query(split_by=split_by))
    if split_by is None:
        result = check_budget(whole, limits)
        if fmt == "json":
            emit(render.dumps(render.budget_dict(result)), None)
        else:
            emit(render.budget_text(result), None)
        if result.failed or result.undecided:
            sys.exit(1 if result.failed else 3)
        return
    # The stages are checked against all the traces once; a value that never
    # passes through one (a cached answer, no model) gets "n/a" for its limits.
    check_budget(whole, limits)
    parts = split_analysis(
        whole,
        split_by,
        lambda cols, loaded, tally: check_budget(
            aggregate_columns(cols, "stage", loaded, tally), limits, absent_stages="skip"
        ),
    )
    if fmt == "json":
        emit(render.dumps(render.split_budget_dict(parts)), None)
    else:
        emit(render.split_budget_text(parts), None)
    if any(r.failed or r.undecided for _, _, r in parts.parts):
        sys.exit(1 if any(r.failed for _, _, r in parts.parts) else 3)


COMMANDS = (analyze, whatif, compare, report, check)
