"""Stage maps: stages for spans that carry no ``hoptrace.stage``.

A TOML (or JSON) file of ``[[rule]]`` tables; the first rule that matches a span gives
its stage. A rule matches on any of (all given ones must hold):

- ``service``, ``operation``: shell-style patterns, or lists of them (``*`` by default);
- ``kind``: ``client``, ``server``, ``internal``, ``producer`` or ``consumer``;
- ``attribute``: a key the span must carry;
- ``attributes``: a table of keys and the values they must have (compared as text);
- ``inside = "engine_request"``: the span sits in a serving engine's request span.

A rule may also say ``after_parent = true``: when the span's parent is itself a phase
(its stage a sub-stage, ``inference.prefill``), the span follows it although it is
nested under it (llm-d's P/D proxy starts ``decode`` in ``prefill``'s context once
prefill is done), so it is taken as its parent's sibling, not as part of it.

::

    [[rule]]
    service = "frontend"
    operation = "HTTP GET /dispatch"
    stage = "gateway"

    [[rule]]
    attribute = "db.system"
    stage = "context"

A user's map (``--stage-map``) is asked before the network rule; the conventions that
ship with hoptrace (the serving engines' rules, in their modules in
:mod:`tracer.engines`, then ``conventions.toml`` beside this module; see
``docs/conventions.md``) use the same format and are asked after it. They may give a
``role`` instead of a stage: ``llm_call`` (an LLM SDK call: ``client`` time, or
``inference`` when the called service is not traced), ``engine_request`` (a serving
engine's span for one request, ``inference`` split into queue, prefill and decode) or
``invocation`` (an agent or workflow invocation: a GenAI span that is not a model call;
it has no stage of its own and passes on the one it inherits).
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from tracer import engines
from tracer._errors import ConfigError
from tracer.spans.model import Span, kind_from_name

__all__ = [
    "ENGINE_REQUEST",
    "INVOCATION",
    "LLM_CALL",
    "Rule",
    "StageMapRules",
    "conventions",
    "load_stage_map",
    "parse_stage_map",
]

LLM_CALL = "llm_call"
ENGINE_REQUEST = "engine_request"
INVOCATION = "invocation"
_ROLES = (LLM_CALL, ENGINE_REQUEST, INVOCATION)
_KEYS = {
    "service",
    "operation",
    "kind",
    "attribute",
    "attributes",
    "inside",
    "stage",
    "role",
    "after_parent",
}
_DOC_KEYS = {"source", "note"}  # documentation only


def _matcher(patterns: tuple[str, ...]) -> Callable[[str], bool] | None:
    """A fast test for shell-style patterns; None when they match everything."""
    if "*" in patterns:
        return None
    exact = frozenset(p for p in patterns if not any(c in p for c in "*?["))
    wild = [p for p in patterns if p not in exact]
    if not wild:
        return exact.__contains__
    regex = re.compile("|".join(fnmatch.translate(p) for p in wild))
    return lambda text: text in exact or regex.match(text) is not None


@dataclass(frozen=True)
class Rule:
    """One ``[[rule]]``: what it matches and the stage (or role) it gives."""

    stage: str | None = None
    role: str | None = None
    service: tuple[str, ...] = ("*",)
    operation: tuple[str, ...] = ("*",)
    kind: int | None = None
    attribute: str | None = None
    attributes: tuple[tuple[str, str], ...] = ()
    inside_engine: bool = False
    after_parent: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "_service", _matcher(self.service))
        object.__setattr__(self, "_operation", _matcher(self.operation))

    def matches(self, span: Span, in_engine: bool = False) -> bool:
        """True when ``span`` (inside an engine request span or not) meets every key."""
        a = span.attributes
        if self.attribute is not None and self.attribute not in a:
            return False
        for key, value in self.attributes:
            if key not in a or str(a[key]) != value:
                return False
        if self.inside_engine and not in_engine:
            return False
        if self.kind is not None and span.kind != self.kind:
            return False
        op: Any = self._operation  # type: ignore[attr-defined]
        if op is not None and not op(span.name):
            return False
        svc: Any = self._service  # type: ignore[attr-defined]
        return svc is None or svc(span.service)


@dataclass(frozen=True)
class StageMapRules:
    """Ordered rules; :meth:`match` gives the first that matches a span."""

    rules: tuple[Rule, ...]

    def __post_init__(self) -> None:
        # An index of necessary conditions, so that a span is tried only against the
        # rules it could meet: rules that name exact operations are found by the span's
        # name, rules that require an attribute by the span's keys, the rest always.
        by_name: dict[str, list[int]] = {}
        by_key: dict[str, list[int]] = {}
        always: list[int] = []
        for n, rule in enumerate(self.rules):
            names = rule.operation
            if "*" not in names and not any(c in p for p in names for c in "*?["):
                for name in names:
                    by_name.setdefault(name, []).append(n)
            elif rule.attribute is not None or rule.attributes:
                key = rule.attribute if rule.attribute is not None else rule.attributes[0][0]
                by_key.setdefault(key, []).append(n)
            else:
                always.append(n)
        object.__setattr__(self, "_by_name", {k: tuple(v) for k, v in by_name.items()})
        object.__setattr__(self, "_by_key", {k: tuple(v) for k, v in by_key.items()})
        object.__setattr__(self, "_always", tuple(always))

    def match(self, span: Span, in_engine: bool = False) -> Rule | None:
        """The first rule matching ``span``, or None."""
        found: Any = self._by_name.get(span.name, ())  # type: ignore[attr-defined]
        by_key: dict[str, tuple[int, ...]] = self._by_key  # type: ignore[attr-defined]
        if by_key:
            a = span.attributes
            if len(a) <= len(by_key):
                for key in a:
                    more = by_key.get(key)
                    if more is not None:
                        found = found + more
            else:
                for key, more in by_key.items():
                    if key in a:
                        found = found + more
        always = self._always  # type: ignore[attr-defined]
        if always:
            found = found + always
        if not found:
            return None
        rules = self.rules
        for n in sorted(found) if len(found) > 1 else found:
            rule = rules[n]
            if rule.matches(span, in_engine):
                return rule
        return None

    def __call__(self, service: str, operation: str) -> str | None:
        """The stage of a span known only by service and operation name (no attributes)."""
        probe = Span("", "", None, service, operation, 0, 0, 0)
        rule = self.match(probe)
        return rule.stage if rule is not None else None


def _patterns(where: str, key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ConfigError(f"{where}: {key} must be a pattern or a list of patterns, got {value!r}")


def _rule(where: str, raw: Any, roles: bool) -> Rule:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} is not a table")
    unknown = set(raw) - _KEYS - _DOC_KEYS
    if unknown or (not roles and "role" in raw):
        bad = sorted(unknown | ({"role"} if not roles and "role" in raw else set()))
        raise ConfigError(
            f"{where} has unknown keys {bad}; use service, operation, kind, attribute, "
            "attributes, inside, after_parent and stage"
        )
    stage, role = raw.get("stage"), raw.get("role")
    if role is not None and role not in _ROLES:
        raise ConfigError(f"{where}: role must be one of {', '.join(_ROLES)}, got {role!r}")
    if (stage is None) == (role is None) or (stage is not None and not isinstance(stage, str)):
        raise ConfigError(f'{where} needs a stage = "..."' + (" or a role" if roles else ""))
    kind = None
    if "kind" in raw:
        kind = kind_from_name(str(raw["kind"]))
        if kind == 0:
            raise ConfigError(
                f"{where}: kind must be client, server, internal, producer or consumer"
            )
    attributes = raw.get("attributes", {})
    if not isinstance(attributes, dict):
        raise ConfigError(f"{where}: attributes must be a table of key = value")
    inside = raw.get("inside")
    if inside not in (None, ENGINE_REQUEST):
        raise ConfigError(f'{where}: inside can only be "{ENGINE_REQUEST}", got {inside!r}')
    attribute = raw.get("attribute")
    if attribute is not None and not isinstance(attribute, str):
        raise ConfigError(f"{where}: attribute must be a key, got {attribute!r}")
    after_parent = raw.get("after_parent", False)
    if not isinstance(after_parent, bool):
        raise ConfigError(f"{where}: after_parent must be true or false, got {after_parent!r}")
    return Rule(
        stage=stage,
        role=role,
        service=_patterns(where, "service", raw.get("service", "*")),
        operation=_patterns(where, "operation", raw.get("operation", "*")),
        kind=kind,
        attribute=attribute,
        attributes=tuple((str(k), str(v)) for k, v in attributes.items()),
        inside_engine=inside == ENGINE_REQUEST,
        after_parent=after_parent,
    )


def parse_stage_map(doc: Any, origin: str, roles: bool = False) -> StageMapRules:
    """Rules from a parsed document (``{"rule": [...]}``).

    Raises:
        ConfigError: no rules, or a malformed rule (named by its number).
    """
    raw_rules = doc.get("rule") if isinstance(doc, dict) else None
    if not isinstance(raw_rules, list) or not raw_rules:
        raise ConfigError(f"stage map {origin!r} has no [[rule]] entries")
    return StageMapRules(
        tuple(
            _rule(f"stage map rule {n} in {origin!r}", raw, roles)
            for n, raw in enumerate(raw_rules, 1)
        )
    )


def load_stage_map(path: str | Path) -> StageMapRules:
    """Read a stage map file (TOML, or JSON by its suffix).

    Raises:
        ConfigError: the file is missing, not TOML/JSON, or a rule is malformed.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read stage map {str(p)!r}: {exc.strerror or exc}") from exc
    try:
        doc = orjson.loads(data) if p.suffix.lower() == ".json" else tomllib.loads(data.decode())
    except (orjson.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"stage map {str(p)!r} is not valid TOML or JSON: {exc}") from exc
    return parse_stage_map(doc, str(p))


@cache
def conventions() -> StageMapRules:
    """The conventions hoptrace ships, parsed once: the serving engines' rules (each
    engine's in its order, the engines in the registry's, :mod:`tracer.engines`), then
    ``conventions.toml``'s."""
    text = (
        resources.files("tracer.analysis.conventions")
        .joinpath("conventions.toml")
        .read_text("utf-8")
    )
    shipped = parse_stage_map(tomllib.loads(text), "conventions.toml", roles=True).rules
    engine_rules = tuple(
        _rule(f"rule {n} of the {c.name} engine (tracer.engines)", raw, roles=True)
        for c in engines.REGISTRY
        for n, raw in enumerate(c.rules, 1)
    )
    return StageMapRules(engine_rules + shipped)
