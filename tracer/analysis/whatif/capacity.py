"""Capacities the traces do not carry, from the command line or a TOML file.

A capacity is a finite resource of the chain: the slots of a pool (the gateway's
workers, an engine's batch slots) or the cores of a service. Where hoptrace's own
instrumentation runs, the traces carry them (``hoptrace.pool.size``,
``hoptrace.process.cpus``); elsewhere the user gives them::

    --capacity gateway=8,engine=16
    --capacity capacity.toml

    # capacity.toml
    [capacity]
    gateway = 8
    engine = 16
    app = 1.5      # cores

Names are pool names (``hoptrace.pool.name``) or service names; values are positive
numbers. Several ``--capacity`` options add up; a name given twice is an error.

    caps = parse_capacities(["gateway=8", "capacity.toml"])
    caps.get("gateway")  # 8.0
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracer._errors import ConfigError

__all__ = ["Capacities", "load_capacity_file", "parse_capacities", "parse_capacity_pairs"]

_OPTION = "--capacity"
_TABLE = "capacity"
#: What a name may hold: a pool or service name, no separators or spaces.
_NAME = re.compile(r"[A-Za-z0-9_.:/-]+")


@dataclass(frozen=True, slots=True)
class Capacities:
    """The capacities given, by name, in the order given."""

    items: tuple[tuple[str, float], ...] = ()

    def get(self, name: str) -> float | None:
        """The capacity of ``name``, or None when none was given."""
        for key, value in self.items:
            if key == name:
                return value
        return None

    def as_dict(self) -> dict[str, float]:
        """``{name: capacity}``."""
        return dict(self.items)

    def __iter__(self) -> Iterator[str]:
        return (key for key, _ in self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)


def _number(name: str, value: Any, where: str) -> float:
    """A positive, finite capacity, or ConfigError naming ``where`` it came from."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(
            f"{where}: the capacity of {name!r} must be a positive number, got {value!r}"
        )
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise ConfigError(
            f"{where}: the capacity of {name!r} must be a positive number, got {value!r}"
        )
    return number


def _check_name(name: str, where: str) -> str:
    if not _NAME.fullmatch(name):
        raise ConfigError(
            f"{where}: {name!r} is not a pool or service name (letters, digits, and . _ - : /)"
        )
    return name


def parse_capacity_pairs(text: str) -> dict[str, float]:
    """``NAME=N[,NAME=N]`` as ``{name: capacity}``.

    Raises:
        ConfigError: an empty list, a part without ``=``, a bad name, a value that is not
            a positive number, or a name given twice.
    """
    out: dict[str, float] = {}
    parts = [part.strip() for part in text.split(",")]
    if not any(parts):
        raise ConfigError(f"{_OPTION} must be NAME=N[,NAME=N] or a TOML file, got {text!r}")
    for part in parts:
        name, sep, raw = part.partition("=")
        name, raw = name.strip(), raw.strip()
        if not sep or not name or not raw:
            raise ConfigError(
                f"{_OPTION} must be NAME=N[,NAME=N] (e.g. gateway=8) or a TOML file, "
                f"got {part!r} in {text!r}"
            )
        _check_name(name, _OPTION)
        try:
            value: Any = float(raw)
        except ValueError:
            value = raw
        if name in out:
            raise ConfigError(f"{_OPTION}: {name!r} is given twice")
        out[name] = _number(name, value, _OPTION)
    return out


def load_capacity_file(path: str | Path) -> dict[str, float]:
    """The ``[capacity]`` table of a TOML file as ``{name: capacity}``.

    Raises:
        ConfigError: the file cannot be read or is not TOML, it has no ``[capacity]``
            table or anything besides it, or a value is not a positive number.
    """
    where = f"{_OPTION} {str(path)!r}"
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read the file: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}: not a TOML file: {exc}") from None
    extra = sorted(set(data) - {_TABLE})
    if extra:
        raise ConfigError(
            f"{where}: unknown keys or tables {', '.join(map(repr, extra))}; "
            "the file holds one [capacity] table of NAME = N"
        )
    table = data.get(_TABLE)
    if not isinstance(table, dict) or not table:
        raise ConfigError(f"{where}: no [capacity] table of NAME = N (e.g. gateway = 8)")
    return {_check_name(name, where): _number(name, value, where) for name, value in table.items()}


def parse_capacities(values: Iterable[str]) -> Capacities:
    """Every ``--capacity`` value: a ``NAME=N[,NAME=N]`` list, or else a TOML file path.

    Raises:
        ConfigError: a bad list or file (see :func:`parse_capacity_pairs` and
            :func:`load_capacity_file`), or a name given by two of them.
    """
    merged: dict[str, float] = {}
    for value in values:
        given: Mapping[str, float] = (
            parse_capacity_pairs(value) if "=" in value else load_capacity_file(value)
        )
        for name, number in given.items():
            if name in merged:
                raise ConfigError(f"{_OPTION}: {name!r} is given twice")
            merged[name] = number
    return Capacities(tuple(merged.items()))
