"""A package's public names imported on first use (PEP 562), for packages whose parts
are heavy to import and rarely all needed (the collector's server stack, the rich and
HTML renderers)."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

__all__ = ["exports"]


def exports(
    package: str, home: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package``, whose public
    names live in the modules ``home`` maps them to."""

    def getattr_(name: str) -> Any:
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(module), name)

    def dir_() -> list[str]:
        return sorted(set(vars(import_module(package))) | set(home))

    return getattr_, dir_
