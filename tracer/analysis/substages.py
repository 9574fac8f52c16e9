"""Sub-stages: a stage name with a dot is part of the stage before the first dot
(``inference.decode`` is part of ``inference``).

Wherever a stage is selected (``whatif --stage``, ``check`` budgets, ``report
--stage``), ``X`` means X and all its sub-stages and ``X.y`` only that one. Reports show
each sub-stage as a group of its own, under its parent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

__all__ = ["covers", "nested", "parent_of"]

T = TypeVar("T")


def parent_of(stage: str) -> str:
    """The top-level stage ``stage`` belongs to (itself when it has no dot)."""
    return stage.split(".", 1)[0]


def covers(selected: str, stage: str) -> bool:
    """True when selecting ``selected`` selects ``stage``."""
    return stage == selected or stage.startswith(selected + ".")


def nested(items: Iterable[T], name: Callable[[T], str]) -> list[T]:
    """``items`` in their order, each sub-stage moved right under its parent (or under
    the first earlier sub-stage of the same parent when the parent itself is absent)."""
    items = list(items)
    top = [x for x in items if "." not in name(x)]
    subs: dict[str, list[T]] = {}
    for x in items:
        if "." in name(x):
            subs.setdefault(parent_of(name(x)), []).append(x)
    out: list[T] = []
    placed: set[str] = set()
    for x in items:
        key = parent_of(name(x))
        if "." not in name(x):
            out.append(x)
            out.extend(subs.get(key, ()))
            placed.add(key)
        elif key not in placed and not any(name(t) == key for t in top):
            out.extend(subs[key])
            placed.add(key)
    return out
