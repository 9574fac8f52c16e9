"""Placeholder for demo commands (registered by the demo issue)."""

from __future__ import annotations

from typing import Any


def register(group: Any) -> None:
    """Add ``demo`` and ``serve`` to the command group."""
