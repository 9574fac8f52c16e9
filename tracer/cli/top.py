"""``hoptrace top``: the last minute of a running collector, live in the terminal."""

from __future__ import annotations

import time
from typing import Any

import click

from tracer._errors import SourceError

__all__ = ["COMMANDS", "fetch_window", "window_table"]

#: Stage shares shown per row, at most (the rest are in the JSON of GET /live).
_SHARES_SHOWN = 4


def fetch_window(
    collector: str, by: str, window_s: float, token: str | None = None
) -> dict[str, Any]:
    """``GET /live`` of ``collector`` (with its bearer ``token``, when it requires one).

    Raises:
        SourceError: nothing answers there, or it is not a collector with live metrics.
    """
    import httpx

    url = collector.rstrip("/") + "/live"
    try:
        response = httpx.get(
            url,
            params={"by": by, "window": f"{window_s:g}"},
            headers={"authorization": f"Bearer {token}"} if token else {},
            timeout=10,
        )
    except httpx.HTTPError as exc:
        raise SourceError(
            f"no collector answers at {collector} ({type(exc).__name__}); start one with "
            "hoptrace collect or hoptrace serve, or give its URL with --collector"
        ) from None
    if response.status_code != 200:
        try:
            reason = str(response.json().get("message", response.text))
        except ValueError:
            reason = response.text[:200]
        raise SourceError(f"{url} answered {response.status_code}: {reason}")
    try:
        body = response.json()
        body["rows"]
    except (ValueError, KeyError, TypeError):
        raise SourceError(f"{url} did not answer as a hoptrace collector does") from None
    return dict(body)


def _ms(value: float | None) -> str:
    """A time or rate in a narrow column: tenths below 100, whole numbers above."""
    if value is None:
        return "-"
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def window_table(summary: dict[str, Any]) -> Any:
    """One :func:`fetch_window` answer for the terminal: a table of the figures (times
    in ms), then each row's largest critical-path shares on a line of their own, so
    that both fit in 80 columns."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    by = summary["by"]
    traces = f"{summary['traces']} traces"
    estimated = summary.get("estimated_traces", summary["traces"])
    if round(estimated) != summary["traces"]:  # sampled: the traffic they stand for
        traces += f" (standing for {estimated:,.0f})"
    table = Table(
        title=f"last {summary['window_s']:g} s: {traces}, by {by}; times in ms",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
        collapse_padding=True,
    )
    table.add_column(by, overflow="fold", min_width=8)
    for name in ("traces", "P50", "P90", "TTFT P50", "TTFT P90", "tok/s", "errors"):
        table.add_column(name, justify="right", no_wrap=True)
    shares = Table(
        title="critical-path share",
        title_justify="left",
        box=None,
        pad_edge=False,
        show_header=False,
    )
    shares.add_column(by, overflow="fold", min_width=8)
    shares.add_column("shares", overflow="fold")
    for row in summary["rows"]:
        label = str(row[by])
        table.add_row(
            label,
            f"{row['traces']:,}",
            _ms(row["e2e_p50_ms"]),
            _ms(row["e2e_p90_ms"]),
            _ms(row["ttft_p50_ms"]),
            _ms(row["ttft_p90_ms"]),
            _ms(row["output_tokens_per_s"]),
            f"{row['error_rate'] * 100:.1f}%",
        )
        top = list(row["shares"].items())[:_SHARES_SHOWN]
        shares.add_row(label, "  ".join(f"{stage}\u00a0{share:.0%}" for stage, share in top))
    if not summary["rows"]:
        table.caption = "no trace attributed in the window yet"
        return table
    return Group(table, Text(""), shares)


@click.command()
@click.option(
    "--collector",
    default="http://127.0.0.1:4318",
    show_default=True,
    envvar="HOPTRACE_COLLECTOR_URL",
    help="The collector's URL (hoptrace collect or serve) [env: HOPTRACE_COLLECTOR_URL].",
)
@click.option(
    "--by",
    type=click.Choice(("route", "model", "service", "run")),
    default="route",
    show_default=True,
    help="One row per value of this label.",
)
@click.option(
    "--window",
    "window_s",
    type=click.FloatRange(1, 300),
    default=60.0,
    show_default=True,
    help="Seconds of traces summed.",
)
@click.option(
    "--interval",
    type=click.FloatRange(0.2, 3600),
    default=2.0,
    show_default=True,
    help="Seconds between refreshes.",
)
@click.option(
    "--token",
    envvar="HOPTRACE_COLLECTOR_TOKEN",
    help="The collector's bearer token, when it requires one [env: HOPTRACE_COLLECTOR_TOKEN].",
)
@click.option("--once", is_flag=True, help="Print one frame and exit (for scripts).")
def top(
    collector: str, by: str, window_s: float, interval: float, token: str | None, once: bool
) -> None:
    """Stage shares, P50/P90 and TTFT per route or model over the last minute, live
    from a running collector (its GET /live)."""
    from rich.console import Console
    from rich.live import Live

    console = Console()
    summary = fetch_window(collector, by, window_s, token)
    if once:
        console.print(window_table(summary))
        return
    with Live(window_table(summary), console=console, refresh_per_second=4) as live:
        while True:
            time.sleep(interval)
            live.update(window_table(fetch_window(collector, by, window_s, token)))


COMMANDS = (top,)
