"""Sub-stages: a stage name with a dot is part of the stage before the first dot
(``inference.decode`` is part of ``inference``).

Wherever a stage is selected (``whatif --stage``, ``check`` budgets, ``report
--stage``), ``X`` means X and all its sub-stages and ``X.y`` only that one. Reports show
each sub-stage as a group of its own, under its parent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from tracer.attributes import CANONICAL_STAGES

__all__ = ["canonical", "covers", "nested", "parent_of"]

T = TypeVar("T")


def parent_of(stage: str) -> str:
    """The top-level stage ``stage`` belongs to (itself when it has no dot)."""
    return stage.split(".", 1)[0]


def covers(selected: str, stage: str) -> bool:
    """True when selecting ``selected`` selects ``stage``."""
    return stage == selected or stage.startswith(selected + ".")


def nested(items: Iterable[T], name: Callable[[T], str]) -> list[T]:
    """``items`` with each stage's family kept together: at the place of its first
    member (the largest, when ``items`` are sorted by share), the parent first and its
    sub-stages after it, in their order."""
    items = list(items)
    families: dict[str, list[T]] = {}
    for x in items:
        families.setdefault(parent_of(name(x)), []).append(x)
    out: list[T] = []
    for x in items:
        family = families.pop(parent_of(name(x)), None)
        if family is not None:
            out += sorted(family, key=lambda m: "." in name(m))  # stable: parent first
    return out


#: Where stages stand in :func:`canonical`: the request's own order, then the rest.
_ORDER = {name: i for i, name in enumerate((*CANONICAL_STAGES, "network", "other"))}
#: An engine's phases in request order.
_SUB_ORDER = {"queue": 0, "prefill": 1, "decode": 2}


def canonical(items: Iterable[T], name: Callable[[T], str]) -> list[T]:
    """``items`` in the canonical stage order: client, gateway, auth, context,
    inference, postprocess, return, network, other, then other names alphabetically;
    each sub-stage right after its parent (an engine's queue, prefill, decode first)."""

    def key(x: T) -> tuple[int, str, int, int, str]:
        n = name(x)
        parent, _, sub = n.partition(".")
        return (
            _ORDER.get(parent, len(_ORDER)),
            parent,
            1 if sub else 0,
            _SUB_ORDER.get(sub, len(_SUB_ORDER)),
            sub,
        )

    return sorted(items, key=key)
