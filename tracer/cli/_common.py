"""What every command shares: the source options, the output options and dispatch.

Command modules import this one; nothing here imports a command module.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import click

from tracer._errors import ConfigError, HoptraceError
from tracer._sources import BACKENDS, DEFAULT_JAEGER_URL, is_url, shown
from tracer._terminal import printable
from tracer.cli._calls import CallsPlan, calls_options, calls_plan
from tracer.cli._options import (
    check_format_option,
    count,
    finite_positive,
    load_options,
    positive_count,
    price_option,
    store_option,
)

__all__ = [
    "FORMATS",
    "CallsPlan",
    "answer_whatif",
    "calls_options",
    "calls_plan",
    "Selection",
    "busy",
    "check_format_option",
    "count",
    "emit",
    "engine_options",
    "finite_positive",
    "format_option",
    "group_by_option",
    "jaeger_option",
    "load_options",
    "load_question",
    "no_match",
    "parse_prices",
    "positive_count",
    "price_option",
    "render_as",
    "source_label",
    "source_options",
    "split_option",
    "stage_map_of",
    "store_option",
    "trace_links",
    "under_load",
]

FORMATS = ("table", "json", "markdown", "html")


def emit(text: str, output: str | None) -> None:
    """Write ``text`` to ``output`` (and say so on stderr), or print it (control
    characters from trace data shown as escapes: every renderer's text, the PASS/FAIL
    lines of ``check`` too)."""
    if output:
        try:
            Path(output).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot write {output!r}: {exc.strerror or exc}") from None
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(printable(text.rstrip("\n")))


def parse_prices(values: tuple[str, ...]) -> dict[str, tuple[float, float]]:
    """``MODEL=IN:OUT`` options as {model: (price in, price out)} per 1,000 tokens."""
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


def stage_map_of(path: str | None) -> Any:
    """The user's stage map from ``--stage-map``, or None."""
    if not path:
        return None
    from tracer.analysis import load_stage_map

    return load_stage_map(path)


@dataclass(frozen=True)
class Selection:
    """The source options every analysis command shares, as given: the query they
    make (filters, limit and how sources are read; a :class:`~tracer.analysis.Query`
    without its breakdown) and the stage map's file, read when a command asks."""

    base: Any
    stage_map_path: str | None = None

    def query(self, **asks: Any) -> Any:
        """The one query an analysis takes: the options with the stage map read and
        what the command asks (``group_by``, ``split_by``, ``projection``, ...)."""
        return self.base.but(stage_map=self.stage_map(), **asks)

    def load(self, sources: tuple[str, ...], listener: Any = None) -> Any:
        """The selected traces of ``sources`` as a TraceSet; ``listener`` (from
        :func:`busy`) hears which backend a URL is and how fetching goes."""
        from tracer.analysis import load

        notices = listener if listener is not None else _Notices()
        return load(list(sources), self.base, listener=notices)

    def stage_map(self) -> Any:
        """The user's stage map, or None."""
        return stage_map_of(self.stage_map_path)


def source_options(func: Callable[..., Any]) -> Callable[..., Any]:
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
        backend: str,
        query: str | None,
        engine: str,
        scheduler: str | None,
        max_answer_bytes: str | None,
        **kwargs: Any,
    ) -> Any:
        if scheduler is not None and engine != "dask":
            raise ConfigError("--scheduler is for the Dask engine: add --engine dask")
        if max_answer_bytes is not None:
            from tracer._answers import ANSWER_BYTES_ENV, source_answer_limit

            # For every client this command makes, in this process and in its workers.
            os.environ[ANSWER_BYTES_ENV] = str(source_answer_limit(max_answer_bytes))
        from tracer.analysis.query import Query

        base = Query(
            service=service,
            operation=operation,
            run=run_name,
            since=since,
            limit=limit,
            backend=backend,
            traceql=query,
            max_answer_bytes=max_answer_bytes,
            engine=engine,
            scheduler=scheduler,
        )
        return func(*args, selection=Selection(base, stage_map), **kwargs)

    for option in reversed(
        [
            click.option("--service", help="Keep traces that contain a span of this service."),
            click.option("--operation", help="Keep traces that contain a span of this operation."),
            click.option(
                "--limit",
                type=int,
                help="Keep the most recent N traces (a Jaeger or Tempo URL: 100 if not given).",
            ),
            click.option(
                "--since",
                help="Keep traces that started within this time (15m, 2h, 1d; a URL: 1h if not "
                "given).",
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
            click.option(
                "--backend",
                type=click.Choice(BACKENDS),
                default="auto",
                show_default=True,
                help="What a URL source is; auto asks it.",
            ),
            click.option(
                "--max-answer-bytes",
                metavar="SIZE",
                envvar="HOPTRACE_MAX_ANSWER_BYTES",
                help="Largest answer read from a Jaeger or Tempo URL, after decompression "
                "(e.g. 64MiB) [default: 256MiB; env: HOPTRACE_MAX_ANSWER_BYTES].",
            ),
            click.option(
                "--query",
                metavar="TRACEQL",
                help="Grafana Tempo: search with this TraceQL instead of the one made of "
                "--service and --operation (which still select among the traces found).",
            ),
        ]
    ):
        command = option(command)
    return engine_options(command)


def engine_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--engine local|dask`` and ``--scheduler ADDRESS`` (passed as ``engine`` and
    ``scheduler``)."""
    func = click.option(
        "--scheduler",
        metavar="ADDRESS",
        help="With --engine dask: the Dask scheduler (tcp://HOST:PORT); without it, a local "
        "cluster of $HOPTRACE_WORKERS processes runs for the command.",
    )(func)
    return click.option(
        "--engine",
        type=click.Choice(("local", "dask")),
        default="local",
        show_default=True,
        help="Where files and the span store are analysed: local processes, or a Dask "
        "cluster (pip install 'hoptrace[dask]'; the workers must read the files at the "
        "same paths).",
    )(func)


class _Notices:
    """What a trace backend URL turned out to be (one line on stderr), and how fetching
    its traces goes (the spinner's text, on terminals)."""

    def __init__(self, console: Any = None, status: Any = None, what: str = "") -> None:
        self._console = console
        self._status = status
        self._what = what

    def found(self, message: str) -> None:
        if self._console is None:
            click.echo(f"hoptrace: {printable(message)}", err=True)
        else:
            self._console.print(f"hoptrace: {printable(message)}", markup=False, highlight=False)

    def fetched(self, done: int, total: int) -> None:
        if self._status is not None:
            self._status.update(f"{self._what}: {done:,} of {total:,} traces fetched")


@contextlib.contextmanager
def busy(sources: tuple[str, ...], what: str) -> Iterator[_Notices]:
    """A spinner on stderr (terminals only) while large or remote sources are read.

    It yields the listener to give :meth:`Selection.load`: which backend a URL is
    goes to stderr, the count of traces fetched into the spinner.
    """
    from rich.console import Console

    console = Console(stderr=True)
    size = 0
    for source in sources or ():
        path = Path(source).expanduser()
        size += path.stat().st_size if path.is_file() else 0
    remote = any(is_url(s) for s in sources)
    if not console.is_terminal or (size < 16 * 1024 * 1024 and not remote):
        yield _Notices()
        return
    label = f"{what} ({size / 1e6:,.0f} MB)" if size else what
    with console.status(label) as status:
        yield _Notices(console, status, what)


def source_label(sources: tuple[str, ...]) -> str:
    """How a report names its sources."""
    return ", ".join(map(shown, sources)) if sources else "the default span store"


split_option = click.option(
    "--split-by",
    "split_by",
    metavar="ATTRIBUTE",
    help="The same breakdown for each value of this span attribute, side by side "
    "(e.g. gen_ai.request.model, hoptrace.fallback_tier).",
)
group_by_option = click.option(
    "--group-by",
    type=click.Choice(("stage", "service", "operation")),
    default="stage",
    show_default=True,
    help="What the time is broken down by: stage (client, gateway, ... inference), the "
    "service that ran it, or the span's operation name.",
)


def jaeger_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--jaeger-url`` (env ``HOPTRACE_JAEGER_URL``), for the reports' trace links."""
    return click.option(
        "--jaeger-url",
        default="",
        envvar="HOPTRACE_JAEGER_URL",
        metavar="URL",
        help=f"Jaeger UI base URL (e.g. {DEFAULT_JAEGER_URL}) the reports link trace ids "
        "to; without it, only a Jaeger source gets links [env: HOPTRACE_JAEGER_URL].",
    )(func)


def trace_links(jaeger_url: str, sources: tuple[str, ...], traces: Any) -> str:
    """Where the reports' trace links go: ``--jaeger-url`` (or ``HOPTRACE_JAEGER_URL``)
    when given; else, when the one source was a Jaeger URL (``traces.backends`` says
    what it answered as when it was read), that Jaeger (its UI is served at the same
    base as its query API); else the default."""
    ctx = click.get_current_context(silent=True)
    given = ctx is not None and ctx.get_parameter_source("jaeger_url") not in (
        click.core.ParameterSource.DEFAULT,
        None,
    )
    kinds = getattr(traces, "backends", None) or {}
    if given or len(sources) != 1 or list(kinds.values()) != ["jaeger"]:
        return jaeger_url
    return next(iter(kinds))


def format_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--format``, ``-o/--output`` and ``--jaeger-url``."""
    func = jaeger_option(func)
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


def render_as(
    fmt: str,
    output: str | None,
    as_json: Callable[[], Any],
    sections: Callable[[], Any],
    report: Callable[[], Any],
) -> None:
    """Render one result in ``fmt`` and emit it; only the format asked for is built."""
    from tracer.analysis import render

    if fmt == "json":
        emit(render.dumps(as_json()), output)
    elif fmt == "markdown":
        emit(render.to_markdown(sections()), output)
    elif fmt == "html":
        emit(render.to_html(report()), output)
    else:
        emit(render.to_table(sections()), output)


def answer_whatif(
    result: Any,
    whole: Any,
    plan: CallsPlan,
    sources: tuple[str, ...],
    selection: Selection,
    question: Any,
    prices: Any,
    traces: Any = None,
) -> Any:
    """The what-if ``plan`` asks answered (:func:`under_load`), or with ``=max`` the
    most calls that fit the SLO (:func:`tracer.analysis.whatif.afford.most_calls`); with
    ``prices``, the cost of a request before and after."""
    from tracer.analysis.checks.cost import cost_after, cost_per_request

    smap = selection.stage_map()
    cost = cost_per_request(whole, prices) if prices else None
    if plan.search is not None:
        from tracer.analysis.whatif.afford import most_calls

        with busy(sources, "searching for the most calls that meet the SLO"):
            result = most_calls(traces, plan.projection, *plan.search, question, smap, cost)
        click.echo(f"model: {result.model}, {result.model_reason}", err=True)
        return result
    scenario = plan.projection.scenario
    result = under_load(result, sources, selection, smap, question, scenario, traces)
    after = cost_after(cost, scenario)
    return (
        result if cost is None or after is None else replace(result, cost_per_request=(cost, after))
    )


def under_load(
    result: Any,
    sources: tuple[str, ...],
    selection: Selection,
    smap: Any,
    question: Any,
    scenario: Any = None,
    loaded: Any = None,
) -> Any:
    """The what-if answered as ``question`` asks (:func:`tracer.analysis.whatif.answer.answer`,
    the one place that picks the model: ``docs/whatif.md``) for ``scenario`` (default:
    the stage faster); says which model on stderr. ``loaded``: the traces, when read."""
    from tracer.analysis.whatif.answer import answer
    from tracer.analysis.whatif.loadrun import MAX_REQUESTS

    traces: Any = loaded
    failed: HoptraceError | None = None
    if traces is None and question.model != "retime" and result.traces <= MAX_REQUESTS:
        try:
            with busy(sources, "reading the run's traces for the load model") as notices:
                traces = selection.load(sources, notices)
        except HoptraceError as exc:
            failed = exc  # the answer says so (auto retimes, load fails with it)

    def read() -> Any:
        if failed is not None:
            raise failed
        return traces

    with busy(sources, "simulating the run's load before and after"):
        result = answer(result, read, question, smap, scenario)
    click.echo(f"model: {result.model}, {result.model_reason}", err=True)
    return result


def load_question(
    model: str,
    capacities: tuple[str, ...],
    cores: float | None,
    cpu_per_request_ms: float | None,
    slo: str | None,
) -> Any:
    """The load options as a :class:`~tracer.analysis.whatif.answer.Question` (a bad capacity
    or SLO fails before any trace is read)."""
    from tracer.analysis.checks.slo import TRACE_METRICS, parse_slo
    from tracer.analysis.whatif.answer import Question
    from tracer.analysis.whatif.capacity import parse_capacities

    return Question(
        model=model,
        capacity=parse_capacities(capacities).items,
        cores=cores,
        cpu_ms_per_request=cpu_per_request_ms,
        slo=None if slo is None else parse_slo(slo, "--slo", TRACE_METRICS),
    )


def no_match(query: Any, exc: HoptraceError) -> HoptraceError:
    """``exc``, or, when a filter of ``query`` matched nothing, a line that says which
    and how to see what the source holds."""
    filters = [
        f"{flag} {value!r}"
        for flag, value in (
            ("--run", query.run),
            ("--service", query.service),
            ("--operation", query.operation),
            ("--since", query.since),
        )
        if value
    ]
    if not filters or "holds no spans" not in str(exc):
        return exc
    return type(exc)(
        f"no trace matches {' and '.join(filters)}; hoptrace runs SOURCE lists the runs a "
        "source holds"
    )
