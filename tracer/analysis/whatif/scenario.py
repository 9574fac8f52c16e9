"""A what-if scenario as a value: the change to the chain a what-if asks about
(``docs/whatif.md``).

Both models take a scenario through one protocol, :class:`Scenario`: the retiming
(:mod:`tracer.analysis.whatif.retime`) multiplies each span's own time by
:meth:`Scenario.factor` of its stage, and the load model
(:mod:`tracer.analysis.whatif.loadmodel`) multiplies the waiting time of each stretch of a
request by the same factor. :meth:`Scenario.calls` says how many calls a stage makes
and how they are arranged: N in sequence (:class:`Repeat`, a self-check or a revision
round) or N in parallel, the request waiting for the slowest (:class:`Fanout`,
best-of-N); both models expand the stage's spans into that many copies
(:mod:`tracer.analysis.whatif.expand`). A new kind of change is one class that answers the
protocol; nothing else needs to know it. Changes combine (:class:`Combined`).

    Faster("inference", 10).factor("inference.decode")  # 0.1
    Faster("auth", 0.5).describe()                      # 'auth 0.5x faster'
    Combined((Faster("inference", 100), Repeat("inference", 2))).calls("inference")
    # Calls(n=2, parallel=False, of='inference')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, NamedTuple, Protocol, runtime_checkable

from tracer._errors import ConfigError
from tracer.analysis.model.substages import covers

__all__ = [
    "MAX_CALLS",
    "MIN_SPEEDUP",
    "ONE",
    "Calls",
    "Combined",
    "Fanout",
    "Faster",
    "Repeat",
    "Scenario",
    "parse_calls",
]

#: The smallest speedup asked about: a stage 1000 times slower.
MIN_SPEEDUP = 0.001
#: The most calls of a stage asked about (and the bound of the search for the most
#: that fit an SLO).
MAX_CALLS = 64


class Calls(NamedTuple):
    """How many calls a stage makes and how: ``n`` in sequence, or in parallel (the
    request waits for the slowest); ``of``: the stage the calls are of (the one whose
    calls in the run the parallel copies are drawn from)."""

    n: int
    parallel: bool = False
    of: str = ""


#: One call, as measured.
ONE = Calls(1)


@runtime_checkable
class Scenario(Protocol):
    """A change to the chain: what each model asks of it."""

    @property
    def stage(self) -> str:
        """The stage the change is about (named in every output)."""
        ...

    @property
    def speedup(self) -> float:
        """How many times faster the stage gets (below 1: slower)."""
        ...

    def factor(self, stage: str) -> float:
        """What the own time of a span in ``stage`` is multiplied by (1: unchanged)."""
        ...

    def calls(self, stage: str) -> Calls:
        """How many calls a span in ``stage`` stands for, and how they are arranged
        (:data:`ONE`: as measured)."""
        ...

    def describe(self) -> str:
        """The change in a few words, e.g. ``inference 10x faster``."""
        ...


@dataclass(frozen=True, slots=True)
class Faster:
    """``stage`` (with its sub-stages) ``speedup`` times faster.

    Raises:
        ConfigError: ``speedup`` is not a positive number of at least
            :data:`MIN_SPEEDUP`.
    """

    stage: str
    speedup: float

    def __post_init__(self) -> None:
        if not self.speedup > 0:
            raise ConfigError(f"speedup must be a positive number, got {self.speedup!r}")
        if self.speedup < MIN_SPEEDUP:
            # Slower is a fair question (0.5: twice as slow); a thousand times slower is
            # the most that keeps nanosecond sums far from overflowing into inf.
            raise ConfigError(
                f"speedup must be at least {MIN_SPEEDUP} (a stage 1000 times slower), "
                f"got {self.speedup!r}"
            )

    def factor(self, stage: str) -> float:
        """``1 / speedup`` for ``stage`` and its sub-stages, else 1."""
        return 1.0 / self.speedup if covers(self.stage, stage) else 1.0

    def calls(self, stage: str) -> Calls:
        """One call: a faster stage is called as often."""
        return ONE

    def describe(self) -> str:
        """``STAGE Kx faster``."""
        return f"{self.stage} {self.speedup:g}x faster"


def _check_calls(option: str, stage: str, n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CALLS:
        raise ConfigError(
            f"{option} {stage}=N: N must be a whole number from 1 to {MAX_CALLS}, got {n!r}"
        )


@dataclass(frozen=True, slots=True)
class _MoreCalls:
    """``stage`` (with its sub-stages) called ``n`` times, each call as fast as
    measured; how they are arranged is the subclass's.

    Raises:
        ConfigError: ``n`` is not a whole number from 1 to :data:`MAX_CALLS`.
    """

    stage: str
    n: int

    #: the option that asks for it, and whether its calls run in parallel
    _OPTION: ClassVar[str] = ""
    _PARALLEL: ClassVar[bool] = False

    def __post_init__(self) -> None:
        _check_calls(self._OPTION, self.stage, self.n)

    @property
    def speedup(self) -> float:
        """As fast as measured."""
        return 1.0

    def factor(self, stage: str) -> float:
        """1: each call takes its time."""
        return 1.0

    def calls(self, stage: str) -> Calls:
        """``n`` calls for ``stage`` and its sub-stages (else one)."""
        return Calls(self.n, self._PARALLEL, self.stage) if covers(self.stage, stage) else ONE


@dataclass(frozen=True, slots=True)
class Repeat(_MoreCalls):
    """``stage`` (with its sub-stages) called ``n`` times in sequence: a self-check or a
    revision round before the answer, which the last call gives.

    Raises:
        ConfigError: ``n`` is not a whole number from 1 to :data:`MAX_CALLS`.
    """

    _OPTION: ClassVar[str] = "--repeat"
    _PARALLEL: ClassVar[bool] = False

    def describe(self) -> str:
        """``STAGE called N times in sequence``."""
        return f"{self.stage} called {self.n} times in sequence"


@dataclass(frozen=True, slots=True)
class Fanout(_MoreCalls):
    """``stage`` (with its sub-stages) called ``n`` times in parallel, the request
    waiting for the slowest (best-of-N: the answer is chosen once all are in).

    Raises:
        ConfigError: ``n`` is not a whole number from 1 to :data:`MAX_CALLS`.
    """

    _OPTION: ClassVar[str] = "--fanout"
    _PARALLEL: ClassVar[bool] = True

    def describe(self) -> str:
        """``best of N STAGE calls in parallel``."""
        return f"best of {self.n} {self.stage} calls in parallel"


@dataclass(frozen=True, slots=True)
class Combined:
    """Several changes at once: the factors multiply; a stage's calls are those of the
    one change that calls it more than once.

    Raises:
        ConfigError: no changes, or two that both change how often one stage is called.
    """

    parts: tuple[Scenario, ...]

    def __post_init__(self) -> None:
        if not self.parts:
            raise ConfigError("a combined change needs at least one change")
        called = [p.stage for p in self.parts if p.calls(p.stage).n > 1]
        for i, a in enumerate(called):
            for b in called[i + 1 :]:
                if covers(a, b) or covers(b, a):
                    raise ConfigError(
                        f"{a} and {b} are called more than once by two changes: "
                        "give one --repeat or --fanout for them"
                    )

    @property
    def stage(self) -> str:
        """The first change's stage."""
        return self.parts[0].stage

    @property
    def speedup(self) -> float:
        """The first change's speedup."""
        return self.parts[0].speedup

    def factor(self, stage: str) -> float:
        """The product of the changes' factors."""
        out = 1.0
        for p in self.parts:
            out *= p.factor(stage)
        return out

    def calls(self, stage: str) -> Calls:
        """The calls of the change that calls ``stage`` more than once, else one."""
        for p in self.parts:
            got = p.calls(stage)
            if got.n > 1:
                return got
        return ONE

    def describe(self) -> str:
        """The changes, joined by ``and``."""
        return " and ".join(p.describe() for p in self.parts)


def parse_calls(option: str, text: str) -> tuple[str, int | None]:
    """``STAGE=N`` or ``STAGE=max`` (``--repeat inference=2``) as (stage, N), N None
    for ``max``.

    Raises:
        ConfigError: not STAGE=N, or N not a whole number from 1 to :data:`MAX_CALLS`.
    """
    stage, sep, raw = (part.strip() for part in text.partition("="))
    if not sep or not stage or not raw:
        raise ConfigError(
            f"{option} must be STAGE=N (N calls, 1 to {MAX_CALLS}) or STAGE=max, got {text!r}"
        )
    if raw.lower() == "max":
        return stage, None
    try:
        n = int(raw)
    except ValueError:
        raise ConfigError(
            f"{option} {stage}=N: N must be a whole number from 1 to {MAX_CALLS} or max, "
            f"got {raw!r}"
        ) from None
    _check_calls(option, stage, n)
    return stage, n
