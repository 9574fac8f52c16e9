"""What kind of trace source a string names (a leaf: the CLI asks it before any import
of the analyzer)."""

from __future__ import annotations

__all__ = ["BACKENDS", "DEFAULT_JAEGER_URL", "is_url", "shown"]

#: Trace backends a URL can be: ``auto`` asks the URL which one it is.
BACKENDS = ("auto", "jaeger", "tempo")
#: Jaeger's UI on its default port; ``--jaeger-url`` / ``HOPTRACE_JAEGER_URL`` change it.
DEFAULT_JAEGER_URL = "http://localhost:16686"


def is_url(source: str) -> bool:
    """True for an http(s) URL (a trace backend), False for a path."""
    return source.startswith(("http://", "https://"))


def shown(source: str) -> str:
    """``source`` as messages and reports name it: a URL without its ``user:password@``."""
    if not is_url(source):
        return source
    scheme, _, rest = source.partition("://")
    host, slash, path = rest.partition("/")
    if "@" in host:
        host = host.rsplit("@", 1)[1]
    return f"{scheme}://{host}{slash}{path}"
