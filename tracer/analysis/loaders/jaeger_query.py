"""Jaeger's query API over HTTP (``http://host:16686``), see docs/sources.md.

Searches use api/v3 (``GET /api/v3/traces``), whose answer is one merged OTLP span
list (``{"result": ...}``), grouped here by trace id. Its parameters are camelCase
since Jaeger 2.19 (``query.serviceName``, ``query.startTimeMin``,
``query.searchDepth``); older servers know only the snake_case names and, missing the
required times, answer 400 to camelCase: then the snake_case names are used. Without
api/v3 (a plain 404), the v1 search ``/api/traces?service=`` is used.

Traces asked for by id come from ``/api/v3/traces/<id>``, or ``/api/traces/<id>``
(v1 JSON) where api/v3 is missing.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import orjson

from tracer._errors import SourceError
from tracer.analysis.loaders._http import (
    DEFAULT_LIMIT,
    QUIET,
    Fetched,
    Listener,
    add_fetched,
    answer,
    auth_hint,
    error_text,
    fetch_each,
    get,
    http_client,
    json_of,
    trace_ids_of,
)
from tracer.analysis.loaders.files import add_object
from tracer.analysis.model.traceset import TraceSet

if TYPE_CHECKING:
    import httpx  # imported where it is used: a file analysis never needs it

__all__ = ["is_v3_services", "load_jaeger"]

# camelCase (Jaeger 2.19+) and the snake_case names every api/v3 server reads.
_NAMES = {
    "camel": (
        "query.serviceName",
        "query.operationName",
        "query.startTimeMin",
        "query.startTimeMax",
        "query.searchDepth",
    ),
    "snake": (
        "query.service_name",
        "query.operation_name",
        "query.start_time_min",
        "query.start_time_max",
        "query.num_traces",
    ),
}


def _rfc3339(ts: dt.datetime) -> str:
    return ts.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _services(client: httpx.Client, base: str) -> list[str]:
    resp = get(client, f"{base}/api/v3/services", who="Jaeger")
    body = json_of(resp)
    if resp.status_code == 200 and is_v3_services(body):
        return [str(s) for s in body.get("services") or []]
    resp = get(client, f"{base}/api/services", who="Jaeger")
    body = json_of(resp)
    if resp.status_code == 200 and isinstance(body, dict):
        return [str(s) for s in body.get("data") or []]
    raise SourceError(
        f"Jaeger at {base!r} answered {resp.status_code} to a services query: "
        f"{error_text(resp)}{auth_hint(resp.status_code)}"
    )


def is_v3_services(body: Any) -> bool:
    """Whether ``body`` is api/v3's answer to ``GET /api/v3/services``: ``{"services":
    [...]}``, or ``{}`` from a Jaeger that holds no trace yet (its protobuf JSON leaves
    an empty list out)."""
    return isinstance(body, dict) and set(body) <= {"services"}


class _Style:
    """The parameter names this server takes, once known."""

    names: str | None = None
    v3: bool | None = None


def load_jaeger(
    base_url: str,
    traceset: TraceSet,
    *,
    service: str | None = None,
    operation: str | None = None,
    lookback_s: float = 3600.0,
    limit: int | None = None,
    trace_ids: list[str] | None = None,
    listener: Listener = QUIET,
    timeout_s: float = 30.0,
    headers: dict[str, str] | None = None,
) -> None:
    """Search Jaeger (or take ``trace_ids``) and add the traces to ``traceset``.

    Without ``service``, every service Jaeger knows is searched; each search keeps
    its ``limit`` most recent traces (:data:`DEFAULT_LIMIT` when None), and a trace
    that more than one search found is added once.

    Raises:
        SourceError: Jaeger does not answer, or cannot list its services.
    """
    base = base_url.rstrip("/")
    style = _Style()
    with http_client(timeout_s, headers) as client:
        if trace_ids is not None:
            ids = trace_ids_of(trace_ids)
            results = fetch_each(ids, lambda tid: _fetch(client, base, tid, style), listener)
            add_fetched(traceset, results, f"Jaeger at {base}", len(ids))
            return
        want = limit or DEFAULT_LIMIT
        now = dt.datetime.now(dt.UTC)
        since = now - dt.timedelta(seconds=lookback_s)
        seen: set[str] = set()  # a trace through four services is found four times
        for svc in [service] if service else _services(client, base):
            resp = _search(client, base, style, svc, operation, since, now, want + 1)
            if resp.status_code == 404 and isinstance(json_of(resp), dict):
                continue  # api/v3's {"error": {"httpCode": 404, "message": "No traces found"}}
            if resp.status_code >= 400:
                traceset.warnings.note(
                    f"Jaeger answered {resp.status_code} for service {svc!r}: {error_text(resp)}"
                )
                continue
            found = TraceSet(warnings=traceset.warnings)
            _add_body(resp.content, found, f"{base} ({svc})")
            _keep_newest(found, want, limit is not None, svc)
            new = [spans for tid, spans in found.traces.items() if tid not in seen]
            seen.update(found.traces)
            traceset.add(s for spans in new for s in spans)


def _search(
    client: httpx.Client,
    base: str,
    style: _Style,
    svc: str,
    operation: str | None,
    since: dt.datetime,
    now: dt.datetime,
    depth: int,
) -> httpx.Response:
    resp: httpx.Response | None = None
    for names in [style.names] if style.names else ["camel", "snake"]:
        service_p, operation_p, min_p, max_p, depth_p = _NAMES[names]
        params: dict[str, Any] = {
            service_p: svc,
            min_p: _rfc3339(since),
            max_p: _rfc3339(now),
            depth_p: depth,
        }
        if operation:
            params[operation_p] = operation
        resp = get(client, f"{base}/api/v3/traces", params, who="Jaeger")
        if resp.status_code == 400 and names == "camel" and not style.names:
            continue  # before 2.19: the camelCase times were not read, and they are required
        if resp.status_code < 400 or (resp.status_code == 404 and isinstance(json_of(resp), dict)):
            style.names = names  # these names work here: use them first for the next service
        break
    assert resp is not None
    if resp.status_code == 404 and not isinstance(json_of(resp), dict):
        v1: dict[str, Any] = {
            "service": svc,
            "limit": depth,
            "start": int(since.timestamp() * 1e6),
            "end": int(now.timestamp() * 1e6),
        }
        if operation:
            v1["operation"] = operation
        resp = get(client, f"{base}/api/traces", v1, who="Jaeger")
    return resp


def _keep_newest(found: TraceSet, want: int, users_limit: bool, svc: str) -> None:
    if len(found.traces) <= want:
        return
    by_start = sorted(found.traces, key=lambda t: min(s.start_ns for s in found.traces[t]))
    for tid in by_start[: len(by_start) - want]:
        del found.traces[tid]
    how = f"--limit {want} kept" if users_limit else "hoptrace read"
    more = "" if users_limit else " (give --limit N to read more)"
    found.warnings.note(
        f"Jaeger matched more than {want} traces of service {svc!r}: "
        f"{how} the {want} most recent{more}"
    )


def _fetch(client: httpx.Client, base: str, trace_id: str, style: _Style) -> Fetched:
    if style.v3 is not False:
        resp = client.get(f"{base}/api/v3/traces/{trace_id}")
        if resp.status_code == 200:
            style.v3 = True
        # A JSON 404 is api/v3 saying the trace is not there; a plain one, no api/v3.
        if resp.status_code != 404 or style.v3 or isinstance(json_of(resp), dict):
            return answer(trace_id, resp)
    resp = client.get(f"{base}/api/traces/{trace_id}")
    if resp.status_code == 200 and style.v3 is None:
        style.v3 = False
    return answer(trace_id, resp)


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
