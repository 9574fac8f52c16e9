"""A duration as a user writes it (``90s``, ``15m``, ``2h``, ``1d``), in seconds: one
reading for the analyzer's ``--since`` and the collector's retention."""

from __future__ import annotations

import re

from tracer._errors import ConfigError

__all__ = ["parse_duration"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}


def parse_duration(text: str) -> float:
    """Seconds in ``"90s"``, ``"15m"``, ``"2h"``, ``"1d"`` (a bare number is seconds).

    Raises:
        ConfigError: not a duration.
    """
    match = _DURATION.match(str(text))
    if not match:
        raise ConfigError(f"duration must look like 30s, 15m, 2h or 1d, got {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]
