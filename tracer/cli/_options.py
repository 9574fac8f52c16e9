"""Option sets shared by the analysis commands, too long to sit in ``_common``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

__all__ = ["load_options"]


def load_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``whatif``'s choice of model and what the load model needs that traces may lack."""
    for option in reversed(_LOAD_OPTIONS):
        f = option(f)
    return f


_LOAD_OPTIONS = [
    click.option(
        "--slo",
        metavar="ttft=200ms,e2e=2s",
        help="With the load model: the share of requests meeting these limits and the "
        "goodput (requests/s meeting them), before and after.",
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
