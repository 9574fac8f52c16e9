"""``--repeat`` and ``--fanout``: more calls of a stage, for ``whatif`` and ``report``
(``docs/whatif.md``, more calls)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import click

from tracer._errors import ConfigError

__all__ = ["CallsPlan", "calls_options", "calls_plan"]


def calls_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--repeat STAGE=N|max`` and ``--fanout STAGE=N|max``."""
    f = click.option(
        "--fanout",
        multiple=True,
        metavar="STAGE=N|max",
        help="The stage called N times in parallel, the request waiting for the slowest "
        "(best-of-N); max, with --slo: the most calls that still meet it.",
    )(f)
    return click.option(
        "--repeat",
        multiple=True,
        metavar="STAGE=N|max",
        help="The stage called N times in sequence (a self-check or revision round: 2); "
        "max, with --slo: the most calls that still meet it.",
    )(f)


@dataclass(frozen=True)
class CallsPlan:
    """What the options ask: the projection (the speedup and the fixed calls) and,
    with ``=max``, the stage whose most calls are searched and how (in parallel)."""

    projection: Any
    search: tuple[str, bool] | None = None

    def needs_traces(self) -> bool:
        """Whether the run's traces are read before the projection (draws, search)."""
        return self.search is not None or self.projection.parallel

    def ready(self, traces: Any, stage_map: Any) -> CallsPlan:
        """The plan with its parallel calls' draws from ``traces``."""
        return replace(self, projection=self.projection.drawn(traces, stage_map))


def calls_plan(
    stage: str | None,
    speedup: float | None,
    repeat: tuple[str, ...],
    fanout: tuple[str, ...],
    slo: str | None = None,
) -> CallsPlan | None:
    """The what-if the options ask for (None: none), checked before any trace is read.

    Raises:
        ConfigError: --stage without --speedup (or the reverse), a bad --repeat or
            --fanout, more than one of them left at max, max without ``slo``, or two
            changes calling one stage.
    """
    from tracer.analysis.whatif.retime import Projection
    from tracer.analysis.whatif.scenario import Fanout, Repeat, parse_calls

    if (stage is None) != (speedup is None):
        raise ConfigError("--stage and --speedup go together")
    changes: list[Any] = []
    search: tuple[str, bool] | None = None
    for option, values, kind in (("--repeat", repeat, Repeat), ("--fanout", fanout, Fanout)):
        for value in values:
            name, n = parse_calls(option, value)
            if n is not None:
                changes.append(kind(name, n))
            elif search is not None:
                raise ConfigError("only one --repeat or --fanout can be max")
            elif slo is None:
                raise ConfigError(
                    f"{option} {name}=max needs --slo (e.g. --slo e2e=2s): the most calls "
                    "that still meet it"
                )
            else:
                search = (name, kind is Fanout)
    if stage is None and not changes and search is None:
        return None
    if stage is None:
        stage = search[0] if search is not None else changes[0].stage
        speedup = 1.0
    assert speedup is not None
    projection = Projection(stage, speedup, tuple(changes))
    if search is not None:
        # The searched calls must not clash with the fixed ones.
        probe = Fanout if search[1] else Repeat
        Projection(stage, speedup, (*changes, probe(search[0], 2)))
    return CallsPlan(projection, search)
