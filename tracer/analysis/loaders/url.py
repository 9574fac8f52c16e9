"""A trace backend's URL: which backend it is (asked, or given), then read it.

Grafana Tempo answers ``GET /api/status/buildinfo`` with its version (2.3 and later;
older ones answer ``GET /api/echo`` with ``echo``); Jaeger answers
``GET /api/v3/services`` (or ``/api/services``) with its service list (``{}`` when it
holds no trace yet). An answer from neither is one clear :class:`SourceError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracer._errors import ConfigError, SourceError
from tracer._sources import BACKENDS
from tracer.analysis.loaders._http import (
    QUIET,
    Listener,
    auth_hint,
    backend_access,
    get,
    http_client,
    json_of,
)
from tracer.analysis.loaders.jaeger_query import is_v3_services, load_jaeger
from tracer.analysis.loaders.tempo import load_tempo
from tracer.analysis.model.traceset import TraceSet

if TYPE_CHECKING:
    import httpx

__all__ = ["BACKENDS", "load_url", "resolve_backend"]

#: What ``--backend`` takes.


def resolve_backend(
    url: str,
    backend: str = "auto",
    listener: Listener = QUIET,
    headers: dict[str, str] | None = None,
) -> str:
    """``"jaeger"`` or ``"tempo"``: ``backend`` itself, or, for ``"auto"``, what the URL
    answers as (``listener`` is told which). Without ``headers``, the URL's
    ``user:password@`` and :data:`~tracer.analysis.loaders._http.HEADERS_ENV` are read
    here (``backend_access``), so no caller sends the probe without them or prints the
    password.

    Raises:
        ConfigError: ``backend`` is not one of :data:`BACKENDS`, or a bad
            ``HOPTRACE_BACKEND_HEADERS``.
        SourceError: nothing answers at ``url``, or it answers as neither backend.
    """
    if backend not in BACKENDS:
        raise ConfigError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend != "auto":
        return backend
    if headers is None:
        url, headers = backend_access(url)
    base = url.rstrip("/")
    with http_client(10.0, headers) as client:
        resp = _first_probe(client, url, f"{base}/api/status/buildinfo")
        info = json_of(resp) if resp.status_code == 200 else None
        if isinstance(info, dict) and "version" in info and "goVersion" in info:
            listener.found(f"{url} is Grafana Tempo {info['version']}")
            return "tempo"
        tempo_said = resp.status_code
        for path, is_jaeger in (("/api/v3/services", is_v3_services), ("/api/services", _is_v1)):
            resp = get(client, base + path, who="the trace backend")
            if resp.status_code == 200 and is_jaeger(json_of(resp)):
                listener.found(f"{url} is Jaeger")
                return "jaeger"
        jaeger_said = resp.status_code
        resp = get(client, f"{base}/api/echo", who="the trace backend")
        if resp.status_code == 200 and resp.text.strip() == "echo":
            listener.found(f"{url} is Grafana Tempo (before 2.3)")
            return "tempo"
    if tempo_said in (401, 403) and jaeger_said in (401, 403):
        raise SourceError(
            f"{url!r} refused hoptrace ({tempo_said} to GET /api/status/buildinfo)"
            f"{auth_hint(tempo_said)}"
        )
    raise SourceError(
        f"{url!r} answers neither as Grafana Tempo (GET /api/status/buildinfo: {tempo_said}) "
        f"nor as Jaeger (GET /api/services: {jaeger_said}); give Tempo's or Jaeger's query "
        "URL (http://host:3200, http://host:16686), or say which with --backend"
    )


def _is_v1(body: object) -> bool:
    return isinstance(body, dict) and "data" in body


def _first_probe(client: httpx.Client, url: str, probe: str) -> httpx.Response:
    """The first probe's answer; nothing answering at all names what each backend is
    asked (a Jaeger URL must not read as a Tempo one)."""
    import httpx

    try:
        return client.get(probe)
    except httpx.TransportError as exc:
        raise SourceError(
            f"nothing answers at {url!r} ({exc}); hoptrace asks Jaeger GET /api/v3/services "
            "(UI and query port 16686) and Tempo GET /api/status/buildinfo (port 3200): is "
            "the backend running there?"
        ) from exc


def load_url(
    url: str,
    traceset: TraceSet,
    *,
    backend: str = "auto",
    service: str | None = None,
    operation: str | None = None,
    query: str | None = None,
    lookback_s: float = 3600.0,
    limit: int | None = None,
    trace_ids: list[str] | None = None,
    listener: Listener = QUIET,
) -> None:
    """Read the traces of a Jaeger or Tempo URL into ``traceset``.

    Args:
        url: the backend's query URL; a ``user:password@`` in it is sent as HTTP Basic
            authentication (and left out of every message), and the headers of
            ``HOPTRACE_BACKEND_HEADERS`` go with every request (``_http.backend_access``).
        backend: ``auto`` (ask the URL), ``jaeger`` or ``tempo``.
        service, operation: search for traces with a span of these.
        query: TraceQL (Tempo only) to search with instead.
        lookback_s: search the traces that started within this many seconds.
        limit: read at most this many traces (the backends' default when None).
        trace_ids: read these traces by id, without a search.
        listener: told which backend answered, and the progress of long fetches.

    Raises:
        ConfigError: a TraceQL ``query`` for Jaeger, a bad ``backend`` or
            ``HOPTRACE_BACKEND_HEADERS``.
        SourceError: the backend does not answer or refuses the search.
    """
    url, headers = backend_access(url)
    kind = resolve_backend(url, backend, listener, headers)
    traceset.backends[url.rstrip("/")] = kind
    if kind == "tempo":
        load_tempo(
            url,
            traceset,
            service=service,
            operation=operation,
            query=query,
            lookback_s=lookback_s,
            limit=limit,
            trace_ids=trace_ids,
            listener=listener,
            headers=headers,
        )
        return
    if query and trace_ids is None:
        raise ConfigError(
            f"--query is TraceQL, which Grafana Tempo reads; {url} is Jaeger: "
            "select with --service and --operation"
        )
    load_jaeger(
        url,
        traceset,
        service=service,
        operation=operation,
        lookback_s=lookback_s,
        limit=limit,
        trace_ids=trace_ids,
        listener=listener,
        headers=headers,
    )
