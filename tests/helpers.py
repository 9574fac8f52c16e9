"""Helpers shared by the test modules."""

from __future__ import annotations

import subprocess
import sys


def hoptrace(*args: str, timeout: float = 120, **kwargs: object) -> subprocess.CompletedProcess:
    """Run ``hoptrace ARGS`` in a child process; text output captured."""
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-m", "tracer.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )
