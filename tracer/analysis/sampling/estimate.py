"""Estimates of the whole traffic from a weighted sample of traces, with intervals.

A trace kept by probability sampling stands for ``w = 1/p`` traces (its adjusted
count, :mod:`tracer.analysis.sampling.weights`). Every figure is a Horvitz-Thompson estimate:

- a total (traces, tokens) is ``sum(w * y)``;
- a ratio (a stage's share of the time, a mean, the share of traces meeting an SLO)
  is ``sum(w * y) / sum(w * x)``;
- a percentile is the weighted quantile: values sorted, the k-th at the position
  ``sum of the weights before it / sum of all weights but the last``, linear in between
  (numpy's default percentile when the weights are equal).

Intervals are 95% (:data:`CONFIDENCE`) normal approximations with the variance of
Poisson sampling (each trace kept on its own with probability ``p``): a total's is
``sum(w * (w - 1) * y**2)``, a ratio's that of its linearisation
``(y - R * x) / sum(w * x)``. A percentile's interval is Woodruff's: the interval of
the estimated distribution function at the percentile (a ratio of indicators), mapped
back through the weighted quantile, so it needs no resampling and gives the same
answer on every run. A trace of weight 1 adds nothing to any variance: full data gives
intervals of zero width, and the analyzer shows none (docs/sampling.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "CONFIDENCE",
    "Interval",
    "quantiles",
    "ratio",
    "total",
    "weighted_percentiles",
]

#: The confidence of every interval.
CONFIDENCE = 0.99
_Z = 2.5758293035489004  # the standard normal's 99.5% point


@dataclass(frozen=True, slots=True)
class Interval:
    """An estimate's confidence interval (:data:`CONFIDENCE`)."""

    low: float
    high: float

    @property
    def width(self) -> float:
        """``high - low``."""
        return self.high - self.low

    def scaled(self, factor: float) -> Interval:
        """Both ends times ``factor`` (a unit change)."""
        return Interval(self.low * factor, self.high * factor)


def total(w: np.ndarray, y: np.ndarray | None = None) -> tuple[float, Interval]:
    """The estimated total of ``y`` (of ones: the number of traces) and its interval."""
    yy = np.ones(w.size) if y is None else y.astype(float, copy=False)
    est = float(np.dot(w, yy))
    half = _Z * math.sqrt(max(float(np.dot(w * (w - 1.0), yy * yy)), 0.0))
    return est, Interval(max(est - half, 0.0) if (yy >= 0).all() else est - half, est + half)


def ratio(w: np.ndarray, y: np.ndarray, x: np.ndarray | None = None) -> tuple[float, Interval]:
    """``sum(w*y) / sum(w*x)`` (``x`` of ones: the mean of ``y``) and its interval;
    (0, [0, 0]) when the denominator is zero."""
    xx = np.ones(w.size) if x is None else x.astype(float, copy=False)
    yy = y.astype(float, copy=False)
    den = float(np.dot(w, xx))
    if den <= 0:
        return 0.0, Interval(0.0, 0.0)
    r = float(np.dot(w, yy)) / den
    z = (yy - r * xx) / den
    half = _Z * math.sqrt(max(float(np.dot(w * (w - 1.0), z * z)), 0.0))
    return r, Interval(r - half, r + half)


def _positions(w_sorted: np.ndarray) -> np.ndarray:
    """Each sorted value's position in 0..1: the weight before it over all but the last."""
    before = np.cumsum(w_sorted) - w_sorted
    span = before[-1]
    return before / span if span > 0 else np.zeros(w_sorted.size)


def weighted_percentiles(values: np.ndarray, w: np.ndarray, qs: list[float]) -> list[float]:
    """The ``qs`` percentiles (0..100) of ``values`` weighted by ``w`` (see the module
    docstring); zeros for an empty sample."""
    if values.size == 0:
        return [0.0] * len(qs)
    order = np.argsort(values, kind="stable")
    v, ws = values[order].astype(float), w[order]
    at = _positions(ws)
    return [float(np.interp(q / 100, at, v)) for q in qs]


def quantiles(values: np.ndarray, w: np.ndarray, qs: list[float]) -> list[tuple[float, Interval]]:
    """Each of the ``qs`` percentiles (0..100) with its Woodruff interval."""
    if values.size == 0:
        return [(0.0, Interval(0.0, 0.0)) for _ in qs]
    order = np.argsort(values, kind="stable")
    v, ws = values[order].astype(float), w[order]
    at = _positions(ws)
    total_w = float(ws.sum())
    var_w = ws * (ws - 1.0)
    out = []
    for q in qs:
        p = q / 100
        est = float(np.interp(p, at, v))
        below = (v <= est).astype(float)
        # The estimated distribution function at the estimate and its standard error.
        f = float(np.dot(ws, below)) / total_w
        z = (below - f) / total_w
        se = math.sqrt(max(float(np.dot(var_w, z * z)), 0.0))
        lo = float(np.interp(max(p - _Z * se, 0.0), at, v))
        hi = float(np.interp(min(p + _Z * se, 1.0), at, v))
        out.append((est, Interval(min(lo, est), max(hi, est))))
    return out
