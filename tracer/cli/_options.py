"""Option sets shared by the analysis commands, too long to sit in ``_common``."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from tracer._errors import ConfigError

__all__ = [
    "check_format_option",
    "count",
    "finite_positive",
    "price_option",
    "load_options",
    "positive_count",
    "store_option",
]


def load_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``whatif``'s choice of model and what the load model needs that traces may lack."""
    for option in reversed(_LOAD_OPTIONS):
        f = option(f)
    return f


_LOAD_OPTIONS = [
    click.option(
        "--slo",
        metavar="METRIC=LIMIT[,...]",
        help="With the load model, limits in ms or s: ttft, e2e (e.g. ttft=200ms,e2e=2s; "
        "traces carry no per-token times, so tpot and itl are bench's only): the share of "
        "requests meeting them and the goodput (requests/s meeting them), before and after.",
    ),
    click.option(
        "--model",
        "model",
        type=click.Choice(["auto", "retime", "load"]),
        default="auto",
        show_default=True,
        help="retime: each trace on its own, as if nothing else ran; load: the run's load "
        "simulated (queues, shared CPU); auto: load when the requests overlapped or waited.",
    ),
    click.option(
        "--capacity",
        "capacities",
        multiple=True,
        metavar="NAME=N[,NAME=N]|FILE",
        help="Pool sizes the traces do not carry, for --model load "
        "(gateway=8, or a TOML file with a [capacity] table).",
    ),
    click.option(
        "--cores",
        type=click.FloatRange(min=0, min_open=True),
        help="For --model load: the cores the chain shares [default: from the bench's traces].",
    ),
    click.option(
        "--cpu-per-request-ms",
        type=click.FloatRange(min=0, min_open=True),
        help="For --model load: host CPU per request [default: from the bench's traces].",
    ),
]


def _store_folder(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A ``--store`` whose folder does not exist is an error, not a folder made."""
    folder = Path(value).expanduser().parent if value else None
    if folder is not None and not folder.is_dir():
        raise ConfigError(
            f"--store {value!r}: the folder {str(folder)!r} does not exist; create it "
            "first or give a path in an existing folder"
        )
    return value


store_option = click.option(
    "--store",
    type=click.Path(dir_okay=False),
    callback=_store_folder,
    help="Span store file [default: $HOPTRACE_STORE or ~/.local/share/hoptrace/spans.db].",
)


def finite_positive(
    ctx: click.Context, param: click.Parameter, value: float | None
) -> float | None:
    """An option's callback: a number that must be finite and above 0 (a speedup)."""
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise ConfigError(f"{param.opts[0]} must be a finite number > 0, got {value!r}")
    return value


def positive_count(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    """An option's callback: a whole number of at least 1 (requests, clients)."""
    if value is not None and value < 1:
        raise ConfigError(f"{param.opts[0]} must be a whole number of at least 1, got {value!r}")
    return value


def count(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    """An option's callback: a whole number of at least 0 (warm-up requests)."""
    if value is not None and value < 0:
        raise ConfigError(f"{param.opts[0]} must be a whole number of at least 0, got {value!r}")
    return value


#: ``--price``: tokens priced per 1,000 (analyze, and the report's Tokens card).
price_option = click.option(
    "--price",
    multiple=True,
    metavar="MODEL=IN:OUT",
    help="Price per 1,000 input and output tokens; MODEL may be '*'. Adds the cost per request.",
)


def _table_or_json(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """``check --format``: table or json, as every command says; ``text`` (its old
    name for table) still taken."""
    value = value.lower()
    if value == "text":
        return "table"
    if value not in ("table", "json"):
        raise ConfigError(f"--format must be table or json, got {value!r}")
    return value


#: ``check --format``: the one vocabulary (table, json) of every command.
check_format_option = click.option(
    "--format",
    "fmt",
    default="table",
    show_default=True,
    metavar="[table|json]",
    callback=_table_or_json,
    help="table: one PASS or FAIL line per limit; json: the same as objects.",
)
