"""A what-if scenario as a value: the change to the chain a what-if asks about
(``docs/whatif.md``).

Both models take a scenario through one protocol, :class:`Scenario`: the retiming
(:mod:`tracer.analysis.whatif.retime`) multiplies each span's own time by
:meth:`Scenario.factor` of its stage, and the load model
(:mod:`tracer.analysis.whatif.loadmodel`) multiplies the waiting time of each stretch of a
request by the same factor. A new kind of change is one class that answers the
protocol; nothing else needs to know it.

    Faster("inference", 10).factor("inference.decode")  # 0.1
    Faster("auth", 0.5).describe()                      # 'auth 0.5x faster'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from tracer._errors import ConfigError
from tracer.analysis.model.substages import covers

__all__ = ["MIN_SPEEDUP", "Faster", "Scenario"]

#: The smallest speedup asked about: a stage 1000 times slower.
MIN_SPEEDUP = 0.001


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

    def describe(self) -> str:
        """``STAGE Kx faster``."""
        return f"{self.stage} {self.speedup:g}x faster"
