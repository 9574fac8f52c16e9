"""How long and how much the store keeps: ``--retention`` and ``--max-store-size``.

The store is cut into time partitions (:mod:`collector.partitions`); retention drops
the oldest whole, never the one being written:

- **by age** (``--retention 7d``, ``$HOPTRACE_RETENTION``): a partition goes once the
  last span written to it arrived longer ago than the retention, so spans are kept at
  least that long and at most that plus one partition's time;
- **by size** (``--max-store-size 20GiB``, ``$HOPTRACE_MAX_STORE_SIZE``): the oldest
  partitions go while the pages in use pass the size. Dropped pages are reused by the
  spans that come next, so the file stays within the size plus one partition.

A partition is closed after :attr:`Retention.partition_s` seconds or once it grew by
:attr:`Retention.partition_bytes`: a sixteenth of each limit (so at most about 1/16 of
the store goes in one step), between bounds that keep each partition's index small
enough for ingest not to slow down as the store grows. A full disk under the limit
(a disk shared with others) is still answered with 503 and ``Retry-After``.

The keyword wins over the environment variable, as everywhere in hoptrace.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from collector.memory import MiB, parse_size
from collector.partitions import Partition
from tracer._duration import parse_duration
from tracer._errors import ConfigError

__all__ = [
    "MAX_PARTITION_BYTES",
    "MAX_PARTITION_S",
    "RETENTION_ENV",
    "SIZE_ENV",
    "Retention",
    "RetentionCounts",
    "resolve_retention",
]

RETENTION_ENV = "HOPTRACE_RETENTION"
SIZE_ENV = "HOPTRACE_MAX_STORE_SIZE"
#: The longest a partition is written to, and the most it grows by (its index of trace
#: ids then stays within the writer's page cache).
MAX_PARTITION_S = 3600.0
MAX_PARTITION_BYTES = 64 * MiB
_MIN_PARTITION_S = 1.0
_MIN_PARTITION_BYTES = 64 * 1024
#: A partition's share of each limit.
_SLICES = 16


@dataclass(frozen=True)
class Retention:
    """What the store keeps: spans for ``max_age_s`` after they arrive, and at most
    ``max_bytes`` of pages in use (None: no limit)."""

    max_age_s: float | None = None
    max_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.max_age_s is not None and not self.max_age_s > 0:
            raise ConfigError(f"max_age_s must be positive, got {self.max_age_s!r}")
        if self.max_bytes is not None and self.max_bytes <= 0:
            raise ConfigError(f"max_bytes must be positive, got {self.max_bytes!r}")

    @property
    def partition_s(self) -> float:
        """Seconds a partition is written to before the next one starts."""
        if self.max_age_s is None:
            return MAX_PARTITION_S
        return min(MAX_PARTITION_S, max(_MIN_PARTITION_S, self.max_age_s / _SLICES))

    @property
    def partition_bytes(self) -> int:
        """Bytes a partition grows by before the next one starts."""
        if self.max_bytes is None:
            return MAX_PARTITION_BYTES
        return min(MAX_PARTITION_BYTES, max(_MIN_PARTITION_BYTES, self.max_bytes // _SLICES))

    def expired(
        self, partitions: list[Partition], now_ns: int, used_bytes: int
    ) -> Partition | None:
        """The oldest partition to drop now, or None. ``partitions`` are oldest first;
        the last one (being written) is never dropped. A partition's spans arrived
        before the next one was started."""
        if len(partitions) < 2:
            return None
        oldest, closed_ns = partitions[0], partitions[1].created_ns
        if self.max_bytes is not None and used_bytes > self.max_bytes:
            return oldest
        if self.max_age_s is not None and closed_ns < now_ns - self.max_age_s * 1e9:
            return oldest
        return None

    def describe(self) -> str:
        """The limits in words, for the collector's banner."""
        age = f"{self.max_age_s:g} s" if self.max_age_s is not None else "no age limit"
        size = f"{self.max_bytes / MiB:g} MiB" if self.max_bytes is not None else "no size limit"
        return f"{age} (--retention), {size} (--max-store-size)"


@dataclass
class RetentionCounts:
    """What retention removed since the collector started (for /healthz)."""

    spans_removed: int = 0
    partitions_removed: int = 0
    last_removed_ns: int | None = None
    slowest_removal_s: float = 0.0
    #: The longest a closed partition took to get its index by trace id.
    slowest_seal_s: float = 0.0


def _duration_s(text: str, what: str) -> float:
    try:
        seconds = parse_duration(text)
    except ConfigError:
        raise ConfigError(
            f"{what} must be a duration such as 7d, 12h or 30m, got {text!r}"
        ) from None
    if not seconds > 0:
        raise ConfigError(f"{what} must be longer than 0, got {text!r}")
    return seconds


def resolve_retention(retention: str | None = None, max_store_size: str | None = None) -> Retention:
    """The retention from the keywords, else ``$HOPTRACE_RETENTION`` and
    ``$HOPTRACE_MAX_STORE_SIZE``, else none.

    Raises:
        ConfigError: a value that is not a positive duration or size.
    """
    age_text = retention if retention is not None else os.environ.get(RETENTION_ENV, "").strip()
    size_text = (
        max_store_size if max_store_size is not None else os.environ.get(SIZE_ENV, "").strip()
    )
    age_what = "--retention" if retention is not None else RETENTION_ENV
    size_what = "--max-store-size" if max_store_size is not None else SIZE_ENV
    max_age_s = _duration_s(age_text, age_what) if age_text else None
    max_bytes = parse_size(size_text, size_what) if size_text else None
    if max_bytes is not None and max_bytes <= 0:
        raise ConfigError(f"{size_what} must be larger than 0, got {size_text!r}")
    return Retention(max_age_s, max_bytes)
