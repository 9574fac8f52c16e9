"""``--stage-map``: stages for traces that were not instrumented with ``hoptrace.stage``.

A TOML (or JSON) file of rules; the first rule that matches a span's service and
operation (shell-style patterns, ``*`` by default) gives its stage::

    [[rule]]
    service = "frontend"
    operation = "HTTP GET /dispatch"
    stage = "gateway"

    [[rule]]
    service = "mysql"
    stage = "context"

A span that already carries ``hoptrace.stage`` keeps it.
"""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass
from pathlib import Path

import orjson

from tracer._errors import ConfigError

__all__ = ["StageMapRules", "load_stage_map"]


@dataclass(frozen=True)
class StageMapRules:
    """Ordered (service pattern, operation pattern, stage) rules; call it to map a span."""

    rules: tuple[tuple[str, str, str], ...]

    def __call__(self, service: str, operation: str) -> str | None:
        for svc, op, stage in self.rules:
            if fnmatch.fnmatchcase(service, svc) and fnmatch.fnmatchcase(operation, op):
                return stage
        return None


def load_stage_map(path: str | Path) -> StageMapRules:
    """Read a stage map file.

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
    raw_rules = doc.get("rule") if isinstance(doc, dict) else None
    if not isinstance(raw_rules, list) or not raw_rules:
        raise ConfigError(f"stage map {str(p)!r} has no [[rule]] entries")
    rules = []
    for n, rule in enumerate(raw_rules, 1):
        if not isinstance(rule, dict) or not isinstance(rule.get("stage"), str):
            raise ConfigError(f'stage map rule {n} in {str(p)!r} needs a stage = "..."')
        unknown = set(rule) - {"service", "operation", "stage"}
        if unknown:
            raise ConfigError(
                f"stage map rule {n} has unknown keys {sorted(unknown)}; "
                "use service, operation and stage"
            )
        rules.append(
            (str(rule.get("service", "*")), str(rule.get("operation", "*")), rule["stage"])
        )
    return StageMapRules(tuple(rules))
