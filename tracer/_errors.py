"""The one exception hierarchy of hoptrace.

    HoptraceError
     ├── ConfigError        a bad argument, option, variable or budget file (also a ValueError)
     ├── SourceError        a trace source that cannot be opened or read at all
     │    └── NoUsableDataError   a source was read, but nothing in it can be analysed
     └── ReceiverError      the embedded collector could not start or store

Messages are sentences that name the bad value and say how to fix it; the CLI
prints them as one line and exits non-zero.
"""

from __future__ import annotations

import os

__all__ = [
    "ConfigError",
    "HoptraceError",
    "NoUsableDataError",
    "ReceiverError",
    "SourceError",
    "positive_setting",
]


class HoptraceError(Exception):
    """Base class of every error hoptrace raises on purpose."""


class ConfigError(HoptraceError, ValueError):
    """A bad argument, option, environment variable or budget file."""


class SourceError(HoptraceError):
    """A trace source that cannot be opened or read."""


class NoUsableDataError(SourceError):
    """A source was read, but no trace in it can be analysed."""


class ReceiverError(HoptraceError):
    """The embedded OTLP receiver could not start or could not store a batch."""


def positive_setting(
    value: int | None, keyword: str, variable: str, default: int, unit: str
) -> int:
    """A count from the keyword ``value`` (it wins), else the environment ``variable``
    (digits, ``_`` allowed), else ``default``.

    Raises:
        ConfigError: not a positive number of ``unit``.
    """
    if value is not None:
        if value < 1:
            raise ConfigError(f"{keyword} must be a positive number of {unit}, got {value!r}")
        return value
    setting = os.environ.get(variable, "").strip().replace("_", "")
    if not setting:
        return default
    if not setting.isdecimal() or int(setting) < 1:
        raise ConfigError(f"{variable} must be a positive number of {unit}, got {setting!r}")
    return int(setting)
