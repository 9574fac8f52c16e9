"""Percentiles past an exact limit: a mergeable quantile sketch (DDSketch).

Up to ``HOPTRACE_EXACT_TRACES`` traces (keyword ``exact_traces``; default
:data:`EXACT_TRACES`) every percentile is exact (``numpy.percentile``, linear
interpolation). Past it, the percentile columns (end-to-end, TTFT, each group, each
hop, the what-if's before and after) come from a DDSketch with relative accuracy
:data:`RELATIVE_ACCURACY`: each reported percentile is within 1% of the value of a
sample at that rank. Shares, means, totals, minimums and maximums stay exact (sums); the
tail share is an exact sum over the traces at or above the sketched P90 (all of the
P90's bucket: its value may lie above every trace in it).

A :class:`Sketch` merges with another (bucket counts add up), so sketches of separate
partitions, files or worker processes give the sketch of the whole; they pickle for
the fork pool. Values are bucketed in one numpy pass (``log_gamma`` keys, as
``ddsketch.LogarithmicMapping`` computes them), then each bucket is added once with
its count as weight.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from ddsketch import DDSketch
from ddsketch.mapping import LogarithmicMapping

from tracer._errors import positive_setting

__all__ = [
    "EXACT_TRACES",
    "RELATIVE_ACCURACY",
    "Sketch",
    "exact_traces",
    "percentiles",
    "sketch_note",
    "tail",
]

#: Traces up to which percentiles are exact.
EXACT_TRACES = 10_000_000
#: The sketch's relative accuracy past the limit.
RELATIVE_ACCURACY = 0.01
# LogarithmicMapping's key(v) = ceil(log2(v) * multiplier), offset 0.
_MULTIPLIER = math.log(2) / math.log1p(2 * RELATIVE_ACCURACY / (1 - RELATIVE_ACCURACY))


def exact_traces(value: int | None = None) -> int:
    """The exact-percentile limit: ``value``, else ``HOPTRACE_EXACT_TRACES``, else the
    default.

    Raises:
        ConfigError: not a positive integer.
    """
    return positive_setting(value, "exact_traces", "HOPTRACE_EXACT_TRACES", EXACT_TRACES, "traces")


def sketch_note(limit: int) -> str:
    """The note an output carries when its percentiles came from the sketch."""
    return (
        f"percentiles to within {RELATIVE_ACCURACY:.0%} (DDSketch) past {limit:,} traces, "
        "the tail cut at the sketched P90; shares and means are exact"
    )


class Sketch:
    """A DDSketch of non-negative values (ms or ns) with relative accuracy
    :data:`RELATIVE_ACCURACY`; see the module docstring."""

    __slots__ = ("_mapping", "_sketch")

    def __init__(self) -> None:
        self._sketch = DDSketch(RELATIVE_ACCURACY)
        self._mapping = LogarithmicMapping(RELATIVE_ACCURACY)

    @classmethod
    def of(cls, values: np.ndarray) -> Sketch:
        """A sketch of ``values``."""
        out = cls()
        out.add(values)
        return out

    @property
    def count(self) -> float:
        """Values added (over every merged part)."""
        return float(self._sketch.count)

    def add(self, values: np.ndarray) -> None:
        """Add ``values`` (negative ones count as zero)."""
        values = np.asarray(values, dtype=float)
        positive = values[values > self._mapping.min_possible]
        zeros = values.size - positive.size
        if zeros:
            self._sketch.add(0.0, float(zeros))
        if not positive.size:
            return
        m = self._mapping
        keys = np.ceil(np.log2(positive) * _MULTIPLIER).astype(np.int64)
        unique, counts = np.unique(keys, return_counts=True)
        for key, count in zip(unique.tolist(), counts.tolist(), strict=True):
            self._sketch.add(m.value(key), float(count))

    def merge(self, other: Sketch) -> None:
        """Add the counts of ``other``."""
        self._sketch.merge(other._sketch)

    def quantile(self, q: float) -> float:
        """The value at quantile ``q`` (0..1); 0.0 for an empty sketch."""
        value = self._sketch.get_quantile_value(q)
        return 0.0 if value is None else float(value)


def percentiles(values: np.ndarray, qs: Sequence[float], sketched: bool) -> list[float]:
    """The ``qs`` percentiles (0..100) of ``values``: exact (linear interpolation), or
    from a :class:`Sketch` when ``sketched``."""
    if not sketched:
        return [float(v) for v in np.percentile(values, list(qs))]
    sketch = Sketch.of(values)
    return [sketch.quantile(q / 100) for q in qs]


def tail(values: np.ndarray, sketched: bool) -> np.ndarray:
    """Which ``values`` are at or above their P90: exact, or, when ``sketched``, every
    value in the sketched P90's bucket or above (the bucket's value, up to 1% above its
    members, may lie above all of them)."""
    if not sketched:
        return values >= np.percentile(values, 90)
    p90 = Sketch.of(values).quantile(0.9)
    if p90 <= 0:
        return np.ones(values.shape, dtype=bool)
    key = math.ceil(math.log2(p90) * _MULTIPLIER)
    with np.errstate(divide="ignore"):
        keys = np.ceil(np.log2(np.maximum(values, 0.0)) * _MULTIPLIER)
    return keys >= key
