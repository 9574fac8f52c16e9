"""Prefix caching: how many prompt tokens came from a cache, and TTFT by how much did.

A prompt whose prefix is cached skips most of its prefill, so TTFT depends on the
cache more than on anything else the model does. For the requests whose spans say how
many prompt tokens were cached (``gen_ai.usage.cache_read.input_tokens`` and the other
names :mod:`tracer.analysis.model.breakdown` reads), :func:`cache_stats` gives the cached
share of their prompt tokens and the time to first token (the client's and the model
server's) in buckets of the cached fraction of the prompt:

- ``none``: nothing cached;
- ``partial``: under half of the prompt cached;
- ``mostly``: half of it or more.

When ``mostly`` is much faster than ``none``, the cache decides TTFT, not the model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracer.analysis.table._columns import _NONE, Columns

__all__ = ["BUCKETS", "CacheBucket", "CacheStats", "cache_stats"]

#: The buckets of the cached fraction, with their lower bound (``none`` is exactly 0).
BUCKETS = (("none", 0.0), ("partial", 0.0), ("mostly", 0.5))
_NS_PER_MS = 1e6


@dataclass(frozen=True, slots=True)
class CacheBucket:
    """Requests whose cached fraction of the prompt falls in one bucket; TTFT in ms
    (None where no request of the bucket has one)."""

    name: str
    requests: int
    ttft_p50_ms: float | None
    ttft_p90_ms: float | None
    model_ttft_p50_ms: float | None


@dataclass(frozen=True, slots=True)
class CacheStats:
    """Cached prompt tokens over the requests that report them."""

    requests: int
    cached_total: int
    input_total: int
    cached_mean: float
    buckets: tuple[CacheBucket, ...]

    @property
    def cached_share(self) -> float:
        """The cached share of these requests' prompt tokens (0..1)."""
        return self.cached_total / self.input_total if self.input_total > 0 else 0.0


def _p(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q)) / _NS_PER_MS if values.size else None


def cache_stats(cols: Columns) -> CacheStats | None:
    """The cache's part in the traces of ``cols``; None when no request reports cached
    tokens."""
    cached = cols.cached_tokens
    if cached.size != len(cols):
        return None
    known = cached != _NONE
    if not known.any():
        return None
    c = cached[known]
    tin = np.where(cols.input_tokens[known] == _NONE, 0, cols.input_tokens[known])
    fraction = np.divide(c, tin, out=np.zeros(c.size), where=tin > 0)
    ttft, model_ttft = cols.ttft_ns[known], cols.model_ttft_ns[known]
    masks = (c == 0, (c > 0) & (fraction < 0.5), (c > 0) & (fraction >= 0.5))
    buckets = []
    for (name, _), mask in zip(BUCKETS, masks, strict=True):
        t, m = ttft[mask], model_ttft[mask]
        t, m = t[t != _NONE], m[m != _NONE]
        buckets.append(CacheBucket(name, int(mask.sum()), _p(t, 50), _p(t, 90), _p(m, 50)))
    return CacheStats(
        requests=int(known.sum()),
        cached_total=int(c.sum()),
        input_total=int(tin.sum()),
        cached_mean=float(c.mean()),
        buckets=tuple(buckets),
    )
