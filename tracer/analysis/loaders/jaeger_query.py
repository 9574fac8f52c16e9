"""Jaeger's query API over HTTP (``http://host:16686``).

Searches use the stable api/v3 (``/api/v3/traces?query.service_name=...``), whose
response is one merged OTLP span list; spans are grouped by trace id. When api/v3 is
not there (404), the v1 ``/api/traces`` search is used, which newer Jaeger releases
are removing.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import httpx
import orjson

from tracer._errors import SourceError
from tracer.analysis.loaders.files import add_object
from tracer.analysis.traceset import TraceSet

__all__ = ["load_jaeger"]


def _rfc3339(ts: dt.datetime) -> str:
    return ts.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _get(client: httpx.Client, url: str, params: dict[str, Any]) -> httpx.Response:
    try:
        return client.get(url, params=params)
    except httpx.HTTPError as exc:
        raise SourceError(f"Jaeger at {url!r} did not answer ({exc}); is it running?") from exc


def _services(client: httpx.Client, base: str) -> list[str]:
    resp = _get(client, f"{base}/api/v3/services", {})
    if resp.status_code == 200:
        return [str(s) for s in resp.json().get("services", [])]
    resp = _get(client, f"{base}/api/services", {})
    if resp.status_code == 200:
        return [str(s) for s in resp.json().get("data") or []]
    raise SourceError(f"Jaeger at {base!r} answered {resp.status_code} to a services query")


def load_jaeger(
    base_url: str,
    traceset: TraceSet,
    *,
    service: str | None,
    operation: str | None,
    lookback_s: float,
    limit: int,
    timeout_s: float = 30.0,
) -> None:
    """Search Jaeger and add the traces found to ``traceset``.

    Raises:
        SourceError: Jaeger does not answer or answers with an error.
    """
    base = base_url.rstrip("/")
    now = dt.datetime.now(dt.UTC)
    since = now - dt.timedelta(seconds=lookback_s)
    with httpx.Client(timeout=timeout_s) as client:
        services = [service] if service else _services(client, base)
        for svc in services:
            params: dict[str, Any] = {
                "query.service_name": svc,
                "query.start_time_min": _rfc3339(since),
                "query.start_time_max": _rfc3339(now),
                "query.num_traces": limit,
            }
            if operation:
                params["query.operation_name"] = operation
            resp = _get(client, f"{base}/api/v3/traces", params)
            if resp.status_code == 404 and "result" not in resp.text:
                v1: dict[str, Any] = {
                    "service": svc,
                    "limit": limit,
                    "start": int(since.timestamp() * 1e6),
                    "end": int(now.timestamp() * 1e6),
                }
                if operation:
                    v1["operation"] = operation
                resp = _get(client, f"{base}/api/traces", v1)
            if resp.status_code >= 400:
                traceset.warnings.note(
                    f"Jaeger answered {resp.status_code} for service {svc!r}: {resp.text[:200]}"
                )
                continue
            _add_body(resp.content, traceset, f"{base} ({svc})")


def _add_body(body: bytes, traceset: TraceSet, origin: str) -> None:
    try:
        objs = [orjson.loads(body)]
    except orjson.JSONDecodeError:  # a streamed answer: one JSON object per line
        objs = []
        for line in body.splitlines():
            try:
                objs.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                traceset.warnings.skip(f"{origin}: a part of the answer is not JSON", 0)
    for obj in objs:
        if isinstance(obj, dict) and "error" in obj and "result" not in obj:
            traceset.warnings.note(f"{origin}: {obj['error']!r}"[:300])
            continue
        if not add_object(obj, traceset, origin):
            traceset.warnings.skip(f"{origin}: an answer of an unknown shape", 0)
