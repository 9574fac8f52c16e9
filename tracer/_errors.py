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

__all__ = ["ConfigError", "HoptraceError", "NoUsableDataError", "ReceiverError", "SourceError"]


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
