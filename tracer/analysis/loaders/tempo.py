"""Grafana Tempo's query API over HTTP (``http://host:3200``), see docs/sources.md.

A TraceQL search (``GET /api/search``) names the traces; each is then fetched by id,
from ``/api/v2/traces/<id>`` (Tempo 2.6 and later: ``{"trace": {...}}``) or, when
that path is not there, ``/api/traces/<id>`` (``{"batches": [...]}``). Tempo writes
gogo-jsonpb: base64 ids, kinds as enum names, int64 values as strings; the OTLP
decoder reads all of them.

Tempo's search returns at most ``limit`` traces and its default is 20. hoptrace
asks for one more than it wants, so it knows when more matched than it reads, and
says so in the warnings; it also says when Tempo returned fewer than asked although
its search stopped before it had looked everywhere (a limit on the server's side).
"""

from __future__ import annotations

import math
import re
import time
from typing import TYPE_CHECKING, Any

from tracer._errors import SourceError
from tracer.analysis.loaders._http import (
    DEFAULT_LIMIT,
    QUIET,
    Fetched,
    Listener,
    add_each,
    answer,
    auth_hint,
    error_text,
    fetch_each,
    get,
    http_client,
    json_of,
    note_problems,
    trace_ids_of,
)
from tracer.analysis.model.traceset import TraceSet
from tracer.spans.model import Warnings
from tracer.spans.otlp import normalize_id

if TYPE_CHECKING:
    import httpx  # imported where it is used: a file analysis never needs it

__all__ = ["TEMPO_DEFAULT_LIMIT", "fetch_tempo", "load_tempo", "search_tempo", "traceql"]

#: What Tempo's search returns when no limit is asked for (``default_result_limit``).
TEMPO_DEFAULT_LIMIT = 20
_HINTS = re.compile(r"\bwith\s*\(")
_MAX_LIMIT = re.compile(r"exceeds max limit (\d+)")


def traceql(service: str | None, operation: str | None) -> str:
    """The TraceQL of ``--service`` and ``--operation``: one span of both, or any trace."""
    conditions = []
    if service:
        conditions.append(f"resource.service.name = {_quoted(service)}")
    if operation:
        conditions.append(f"name = {_quoted(operation)}")
    return "{ " + " && ".join(conditions) + " }" if conditions else "{ }"


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def load_tempo(
    base_url: str,
    traceset: TraceSet,
    *,
    service: str | None = None,
    operation: str | None = None,
    query: str | None = None,
    lookback_s: float = 3600.0,
    limit: int | None = None,
    trace_ids: list[str] | None = None,
    listener: Listener = QUIET,
    timeout_s: float = 30.0,
    headers: dict[str, str] | None = None,
) -> None:
    """Search Tempo (or take ``trace_ids``), fetch each trace and add it to ``traceset``.

    Args:
        base_url: Tempo's query URL (``http://host:3200``).
        service, operation: the TraceQL search's span (ignored with ``query``).
        query: TraceQL to search with instead.
        lookback_s: search the traces that started within this many seconds.
        limit: the user's ``--limit``; :data:`DEFAULT_LIMIT` when None.
        trace_ids: fetch these traces, without a search.
        listener: told about progress.
        timeout_s: per request.
        headers: sent with every request (``_http.backend_access``).

    Raises:
        SourceError: Tempo does not answer, or refuses the search.
    """
    if trace_ids is None:
        ids = search_tempo(
            base_url,
            traceset.warnings,
            service=service,
            operation=operation,
            query=query,
            lookback_s=lookback_s,
            limit=limit,
            timeout_s=timeout_s,
            headers=headers,
        )
    else:
        ids = trace_ids_of(trace_ids)
    problems = fetch_tempo(base_url, traceset, ids, listener, timeout_s, headers)
    note_problems(traceset, problems, f"Tempo at {base_url.rstrip('/')}", len(ids))


def search_tempo(
    base_url: str,
    warnings: Warnings,
    *,
    service: str | None = None,
    operation: str | None = None,
    query: str | None = None,
    lookback_s: float = 3600.0,
    limit: int | None = None,
    timeout_s: float = 30.0,
    headers: dict[str, str] | None = None,
) -> list[str]:
    """The ids of the traces a search finds, the most recent first (as :func:`load_tempo`
    searches); what was cut or could not be asked goes to ``warnings``.

    Raises:
        SourceError: Tempo does not answer, or refuses the search.
    """
    q = query or traceql(service, operation)
    want = limit or DEFAULT_LIMIT
    with http_client(timeout_s, headers) as client:
        return _search(
            client, base_url.rstrip("/"), q, lookback_s, want, limit is not None, warnings
        )


def fetch_tempo(
    base_url: str,
    traceset: TraceSet,
    trace_ids: list[str],
    listener: Listener = QUIET,
    timeout_s: float = 30.0,
    headers: dict[str, str] | None = None,
) -> list[Fetched]:
    """Fetch each trace by id into ``traceset``: the ones that could not be read (for
    :func:`~tracer.analysis.loaders._http.note_problems`). A trace Tempo returns in
    part is noted in ``traceset``'s warnings."""
    base = base_url.rstrip("/")
    paths = _Paths()

    def partial(item: Fetched) -> None:
        body = item.body
        if isinstance(body, dict) and body.get("status") == "PARTIAL":
            traceset.warnings.note(
                f"Tempo returned trace {item.trace_id} in part: "
                f"{str(body.get('message') or 'PARTIAL')[:200]}"
            )

    with http_client(timeout_s, headers) as client:
        results = fetch_each(trace_ids, lambda tid: _fetch(client, base, tid, paths), listener)
        return add_each(traceset, results, f"Tempo at {base}", partial)


def _search(
    client: httpx.Client,
    base: str,
    q: str,
    lookback_s: float,
    want: int,
    users_limit: bool,
    warnings: Warnings,
) -> list[str]:
    """Trace ids of the ``want`` most recent traces the TraceQL ``q`` matches."""
    end = math.ceil(time.time())
    hinted = not _HINTS.search(q)
    params: dict[str, Any] = {
        # most_recent (Tempo 2.8+): the newest matches, not the first found.
        "q": f"{q} with (most_recent=true)" if hinted else q,
        "start": end - math.ceil(lookback_s),
        "end": end,
        "limit": want + 1,
    }
    notes = []
    for _ in range(3):
        resp = get(client, f"{base}/api/search", params, who="Tempo")
        if resp.status_code != 400:
            break
        said = error_text(resp)
        cap = _MAX_LIMIT.search(said)
        if cap and 0 < int(cap.group(1)) < params["limit"]:
            params["limit"] = int(cap.group(1))
            if params["limit"] < want:
                notes.append(
                    f"Tempo's max_result_limit is {params['limit']}, below the {want} "
                    f"traces asked for: at most {params['limit']} were read, and more may match"
                )
        elif hinted and params["q"] != q:  # a Tempo before 2.4 knows no query hints
            params["q"] = q
            notes.append(
                "this Tempo does not read TraceQL hints (before 2.4): the traces read are "
                "the first it found in the time range, not the most recent"
            )
        else:
            break
    if resp.status_code >= 400:
        raise SourceError(
            f"Tempo at {base!r} answered {resp.status_code} to the search {q!r}: "
            f"{error_text(resp)}{auth_hint(resp.status_code)}"
        )
    body = json_of(resp)
    if not isinstance(body, dict):
        raise SourceError(f"Tempo at {base!r} answered the search with something that is not JSON")
    for note in notes:
        warnings.note(note)
    hits: dict[str, int] = {}
    for item in body.get("traces") or []:
        tid = normalize_id(item.get("traceID"), 32) if isinstance(item, dict) else None
        if tid is not None:
            hits[tid] = max(hits.get(tid, 0), _int(item.get("startTimeUnixNano")))
    newest = sorted(hits, key=lambda t: hits[t], reverse=True)
    _say_what_was_cut(len(newest), want, params["limit"], users_limit, body, warnings)
    return newest[:want]


def _say_what_was_cut(
    found: int, want: int, asked: int, users_limit: bool, body: dict[str, Any], warnings: Warnings
) -> None:
    raw = body.get("metrics")
    metrics: dict[str, Any] = raw if isinstance(raw, dict) else {}
    total_jobs = _int(metrics.get("totalJobs"))
    # Tempo's search stops when it holds ``limit`` traces: jobs left undone mean it
    # stopped at a limit, with more places left to look.
    stopped_early = bool(total_jobs) and _int(metrics.get("completedJobs")) < total_jobs
    capped = asked <= want  # Tempo's max_result_limit was below what was asked
    if found > want or (found == want and stopped_early and not capped):
        how = f"--limit {want} kept" if users_limit else "hoptrace read"
        more = "" if users_limit else " (give --limit N to read more)"
        warnings.note(f"Tempo matched more than {want} traces: {how} the {want} most recent{more}")
    elif found < want and stopped_early and not capped:
        warnings.note(
            f"Tempo returned {found} traces although {want} were asked for, and stopped "
            f"searching after {_int(metrics.get('completedJobs'))} of {total_jobs} jobs: "
            f"more traces match than it returned. Its search limit is lower than asked "
            f"(its default is {TEMPO_DEFAULT_LIMIT}: is the limit parameter reaching it? "
            "see also max_result_limit); the traces it returned were analysed"
        )
    elif found == TEMPO_DEFAULT_LIMIT < want and not total_jobs and not capped:
        warnings.note(
            f"Tempo returned exactly {found} traces, its default search limit, although "
            f"{want} were asked for: more may match than were analysed (is the limit "
            "parameter reaching it?)"
        )


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


class _Paths:
    """Which trace-by-id path this Tempo has: v2 (2.6+) or only the first one."""

    v2: bool | None = None


def _fetch(client: httpx.Client, base: str, trace_id: str, paths: _Paths) -> Fetched:
    if paths.v2 is not False:
        resp = client.get(f"{base}/api/v2/traces/{trace_id}")
        if resp.status_code == 200:
            paths.v2 = True
            return answer(trace_id, resp)
        if resp.status_code != 404 or paths.v2:
            return answer(trace_id, resp)
    # Tempo before 2.6 has no /api/v2 path (404); the first path reads every version.
    resp = client.get(f"{base}/api/traces/{trace_id}")
    if resp.status_code == 200 and paths.v2 is None:
        paths.v2 = False
    return answer(trace_id, resp)
