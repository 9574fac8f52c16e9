"""What ``hoptrace bench`` accepts and refuses: its arguments, the warm-up each level
gets, and a first level whose every request failed the same hopeless way."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tracer._errors import ConfigError

__all__ = ["check_arguments", "refuse_hopeless", "warmup_requests"]


def check_arguments(
    base_url: str,
    levels: Sequence[int],
    requests: int,
    warmup: int,
    max_tokens: int,
    timeout_s: float,
) -> None:
    """Raise ConfigError, in words a command-line user understands, on a bad argument."""
    if not base_url.startswith(("http://", "https://")):
        raise ConfigError(f"URL must be an http:// or https:// base URL, got {base_url!r}")
    if not levels or any(c < 1 for c in levels):
        raise ConfigError(
            f"--concurrency levels must be whole numbers of at least 1, got {list(levels)!r}"
        )
    for name, value, least in (("--requests", requests, 1), ("--max-tokens", max_tokens, 1)):
        if value < least:
            raise ConfigError(f"{name} must be a whole number of at least 1, got {value!r}")
    if warmup < 0:
        raise ConfigError(f"--warmup must be a whole number of at least 0, got {warmup!r}")
    if not (timeout_s > 0 and math.isfinite(timeout_s)):
        raise ConfigError(f"--timeout must be a finite number of seconds > 0, got {timeout_s!r}")


def warmup_requests(warmup: int, concurrency: int) -> int:
    """Warm-up requests at one level: at least the level's concurrency (none for 0)."""
    return max(warmup, concurrency) if warmup > 0 else 0


def refuse_hopeless(base_url: str, samples: Sequence[Any]) -> None:
    """Raise ConfigError when every request of ``samples`` failed the same way and
    that way says the bench cannot work (a wrong key, a wrong URL, nothing listening)."""
    statuses = {s.status for s in samples}
    if not samples or any(s.ok for s in samples) or len(statuses) != 1:
        return
    status = statuses.pop()
    reasons = {
        "401": "the endpoint answered 401: pass a valid --api-key (or OPENAI_API_KEY)",
        "403": "the endpoint answered 403: the key may not use this model",
        "404": f"the endpoint answered 404: is {base_url} an OpenAI-style base URL ending in /v1?",
        "connect": f"cannot connect to {base_url}: is the server running?",
    }
    if status in reasons:
        raise ConfigError(reasons[status])
