"""Latency budgets: limits per stage and end to end, checked against an analysis.

A budget file (TOML)::

    [e2e]
    p50_ms = 700
    p90_ms = 900

    [ttft]            # time to first token as the client sees it (streams)
    p90_ms = 400

    [stage.inference]
    share_max = 0.5
    p90_ms = 400

``[stage.inference]`` covers ``inference`` and its sub-stages (``inference.decode``, ...);
``[stage."inference.decode"]`` only that one. Keys: ``p50_ms``, ``p90_ms``, ``p99_ms``
everywhere; ``share_max`` and ``tail_share_max`` (fractions of the critical path, 0..1)
for stages. Unknown tables,
keys and stages are errors, so a typo cannot pass silently.

When the traces are a sample of the traffic (sampled traces, weighted by what they
stand for), every measured value is an estimate with a confidence interval, and a limit
is judged on the interval: met when the whole interval is at or under it, exceeded
when the whole interval is above it, and otherwise undecided: the sample is too small
to tell (docs/sampling.md).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from tracer._errors import ConfigError
from tracer.analysis.aggregate import Analysis, Stats, selected_group
from tracer.analysis.sampling.estimate import Interval

__all__ = ["BudgetResult", "Limit", "Verdict", "check_budget", "load_budget"]

PERCENTILE_KEYS = ("p50_ms", "p90_ms", "p99_ms")
SHARE_KEYS = ("share_max", "tail_share_max")


@dataclass(frozen=True, slots=True)
class Limit:
    """One line of a budget: ``scope`` is ``e2e``, ``ttft`` or ``stage.NAME``."""

    scope: str
    key: str
    limit: float


@dataclass(frozen=True, slots=True)
class Verdict:
    """A limit with the measured value; ``measured`` is None for a limit that does not
    apply to these traces (a stage some of a split's values never pass through).
    ``interval``: the measured value's confidence interval, when the traces are a
    sample of the traffic."""

    scope: str
    key: str
    limit: float
    measured: float | None
    interval: Interval | None = None

    @property
    def passed(self) -> bool:
        """Measured at or under the limit (or not applicable); from a sample, the whole
        interval is."""
        if self.measured is None:
            return True
        if self.interval is None:
            return self.measured <= self.limit
        return self.interval.high <= self.limit

    @property
    def undecided(self) -> bool:
        """From a sample, the interval holds the limit: too few traces to tell."""
        iv = self.interval
        return self.measured is not None and iv is not None and iv.low <= self.limit < iv.high

    @property
    def failed(self) -> bool:
        """Exceeded (from a sample, the whole interval is above the limit)."""
        return not self.passed and not self.undecided


@dataclass(frozen=True, slots=True)
class BudgetResult:
    """Every limit of a budget, measured on ``traces`` traces."""

    traces: int
    verdicts: tuple[Verdict, ...]

    @property
    def failed(self) -> tuple[Verdict, ...]:
        """The limits exceeded."""
        return tuple(v for v in self.verdicts if v.failed)

    @property
    def undecided(self) -> tuple[Verdict, ...]:
        """The limits a sample is too small to judge."""
        return tuple(v for v in self.verdicts if v.undecided)

    @property
    def sampled(self) -> bool:
        """The values are estimates from a sample of the traffic."""
        return any(v.interval is not None for v in self.verdicts)

    @property
    def passed(self) -> bool:
        """True when every limit is met."""
        return not self.failed and not self.undecided


def _number(where: str, key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}: {key} must be a number, got {value!r}")
    number = float(value)
    if number < 0:
        raise ConfigError(f"{where}: {key} must not be negative, got {value!r}")
    if key in SHARE_KEYS and number > 1:
        raise ConfigError(f"{where}: {key} is a fraction of the time (0..1), got {value!r}")
    return number


def _limits(where: str, scope: str, table: object, allowed: tuple[str, ...]) -> list[Limit]:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [{scope}] must be a table of limits")
    out = []
    for key, value in table.items():
        if key not in allowed:
            raise ConfigError(
                f"{where}: [{scope}] has unknown key {key!r}; allowed: {', '.join(allowed)}"
            )
        out.append(Limit(scope, key, _number(f"{where} [{scope}]", key, value)))
    return out


def load_budget(path: str | Path) -> list[Limit]:
    """Read a budget file.

    Raises:
        ConfigError: unreadable file, bad TOML, unknown tables or keys, bad values.
    """
    where = str(path)
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"budget file {where} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read budget file {where}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where} is not valid TOML: {exc}") from None
    limits: list[Limit] = []
    for name, table in data.items():
        if name in ("e2e", "ttft"):
            limits += _limits(where, name, table, PERCENTILE_KEYS)
        elif name == "stage":
            if not isinstance(table, dict):
                raise ConfigError(f"{where}: use [stage.NAME] tables, e.g. [stage.inference]")
            for stage, limits_of_stage in table.items():
                limits += _limits(
                    where, f"stage.{stage}", limits_of_stage, PERCENTILE_KEYS + SHARE_KEYS
                )
        else:
            raise ConfigError(f"{where}: unknown table [{name}]; use [e2e], [ttft] or [stage.NAME]")
    if not limits:
        raise ConfigError(f"{where} sets no limits")
    return limits


def _percentile(stats: Stats, key: str) -> tuple[float, Interval | None]:
    name = key.removesuffix("_ms")
    return float(getattr(stats, name)), None if stats.intervals is None else stats.intervals[name]


def check_budget(
    analysis: Analysis, limits: list[Limit], absent_stages: str = "error"
) -> BudgetResult:
    """Measure every limit on ``analysis`` (grouped by stage).

    ``absent_stages="skip"`` marks the limits of stages these traces do not have as not
    applicable instead of raising: for one value of ``--split-by`` when the stage was
    found in the traces as a whole (a cached answer never reaches the model).

    Raises:
        ConfigError: the analysis is not by stage, a budget stage is not in the traces,
            or a ``[ttft]`` budget meets traces without first-token marks.
    """
    if analysis.group_by != "stage":
        raise ConfigError("budgets are checked on an analysis grouped by stage")
    wanted = {lim.scope.removeprefix("stage.") for lim in limits if lim.scope.startswith("stage.")}
    groups = {name: selected_group(analysis, name) for name in wanted}
    unknown = sorted(name for name, group in groups.items() if group is None)
    if unknown and absent_stages != "skip":
        raise ConfigError(
            f"the budget names stages the traces do not have: {', '.join(unknown)}; "
            f"stages in the traces: {', '.join(sorted(g.name for g in analysis.groups))}"
        )
    found = {name: group for name, group in groups.items() if group is not None}
    verdicts = []
    for lim in limits:
        interval: Interval | None = None
        if lim.scope == "e2e":
            measured, interval = _percentile(analysis.e2e, lim.key)
        elif lim.scope == "ttft":
            if analysis.ttft is None:
                raise ConfigError(
                    "the budget has [ttft] but no trace carries a first-token mark "
                    "(streamed requests traced with hoptrace.mark_first_token)"
                )
            measured, interval = _percentile(analysis.ttft, lim.key)
        elif lim.scope.removeprefix("stage.") not in found:
            measured = None
        else:
            group = found[lim.scope.removeprefix("stage.")]
            name = lim.key.removesuffix("_max")
            measured = float(getattr(group, name))
            interval = None if group.intervals is None else group.intervals[name]
        verdicts.append(Verdict(lim.scope, lim.key, lim.limit, measured, interval))
    return BudgetResult(analysis.traces, tuple(verdicts))
