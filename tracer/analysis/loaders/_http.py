"""What the trace backend loaders (Jaeger, Tempo) share: the HTTP client, the backends'
own words about a failed request, and fetching many traces by id.

Fetching runs at most :data:`FETCH_CONCURRENCY` requests at a time and goes on past
bad answers: a timeout, a 5xx or a trace that is gone (404) is counted in the
warnings (``skipped_traces`` and one message per source), and the rest are read.
"""

from __future__ import annotations

import base64
import concurrent.futures as cf
import contextvars
import os
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote

import orjson

from tracer._errors import ConfigError, SourceError
from tracer.analysis.loaders.files import add_object
from tracer.analysis.model.traceset import TraceSet
from tracer.spans.otlp import normalize_id

if TYPE_CHECKING:
    import httpx  # imported where it is used: a file analysis never needs it

__all__ = [
    "ANSWER_LIMIT",
    "DEFAULT_LIMIT",
    "FETCH_CONCURRENCY",
    "HEADERS_ENV",
    "Fetched",
    "Listener",
    "PROGRESS_AFTER",
    "QUIET",
    "add_each",
    "add_fetched",
    "answer",
    "auth_hint",
    "backend_access",
    "error_text",
    "fetch_each",
    "get",
    "http_client",
    "json_of",
    "note_problems",
    "trace_ids_of",
    "unsampled_traceparent",
]

#: Traces fetched from one backend at the same time.
FETCH_CONCURRENCY = 8
#: Progress is reported when more traces than this are fetched.
PROGRESS_AFTER = 36
#: Traces read from a backend search when no limit is given.
DEFAULT_LIMIT = 100
#: Seconds one request may take.
TIMEOUT_S = 30.0
#: The byte limit of one answer for the clients made now (:func:`tracer.analysis.load`
#: sets it from ``max_answer_bytes``); None: ``$HOPTRACE_MAX_ANSWER_BYTES`` or 256 MiB.
ANSWER_LIMIT: contextvars.ContextVar[int | str | None] = contextvars.ContextVar(
    "hoptrace_answer_limit", default=None
)


class Listener(Protocol):
    """What a backend loader tells its caller while it works (the CLI: on stderr)."""

    def found(self, message: str) -> None:
        """One line: which backend a URL turned out to be."""

    def fetched(self, done: int, total: int) -> None:
        """``done`` of ``total`` traces fetched by id (only when more than a few dozen)."""


class _Quiet:
    def found(self, message: str) -> None:
        pass

    def fetched(self, done: int, total: int) -> None:
        pass


#: A listener that says nothing (library calls).
QUIET: Listener = _Quiet()


#: Headers for every request to a trace backend (a tenant, a token): ``name=value``
#: pairs separated by commas, values percent-encoded, as ``OTEL_EXPORTER_OTLP_HEADERS``.
HEADERS_ENV = "HOPTRACE_BACKEND_HEADERS"


def unsampled_traceparent() -> str:
    """A W3C ``traceparent`` whose sampled flag is off. A traced server that samples by
    its parent (OpenTelemetry's default) then records none of hoptrace's requests: a
    URL that turns out to be the user's own application (or a backend that traces
    itself) keeps no traces of the probes that would skew its figures."""
    import secrets

    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-00"


def http_client(
    timeout_s: float = TIMEOUT_S, headers: dict[str, str] | None = None
) -> httpx.Client:
    """A client for one backend: JSON answers of at most :data:`ANSWER_LIMIT` bytes
    (after decompression; see :mod:`tracer._answers`), at most
    :data:`FETCH_CONCURRENCY` connections, ``headers`` (from :func:`backend_access`)
    and an unsampled ``traceparent`` (:func:`unsampled_traceparent`) on every
    request."""
    import httpx

    from tracer._answers import limit_answers, source_answer_limit

    client = httpx.Client(
        timeout=timeout_s,
        limits=httpx.Limits(max_connections=FETCH_CONCURRENCY),
        headers={
            "Accept": "application/json",
            "User-Agent": "hoptrace",
            "traceparent": unsampled_traceparent(),
            **(headers or {}),
        },
    )
    limit_answers(client, source_answer_limit(ANSWER_LIMIT.get()))
    return client


def backend_access(url: str) -> tuple[str, dict[str, str]]:
    """The backend URL without ``user:password@``, and the headers to send it: HTTP
    Basic authentication from that ``user:password`` (so the password never appears
    in a message), then :data:`HEADERS_ENV` (``X-Scope-OrgID=tenant`` for a
    multi-tenant Tempo, ``Authorization=Bearer%20TOKEN``).

    Raises:
        ConfigError: :data:`HEADERS_ENV` is not ``name=value`` pairs.
    """
    import httpx

    headers: dict[str, str] = {}
    parsed = httpx.URL(url)
    if parsed.userinfo:
        token = base64.b64encode(f"{parsed.username}:{parsed.password}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
        url = str(parsed.copy_with(username=None, password=None))
    for item in os.environ.get(HEADERS_ENV, "").split(","):
        if not item.strip():
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not _HEADER_NAME.fullmatch(name):
            raise ConfigError(
                f"{HEADERS_ENV} must be name=value pairs separated by commas "
                f"(X-Scope-OrgID=tenant), got {item.strip()[:60]!r}"
            )
        headers[name] = unquote(value.strip())
    return url, headers


def auth_hint(status: int) -> str:
    """What to do about a 401 or 403 from a backend (empty for other statuses)."""
    if status not in (401, 403):
        return ""
    return (
        f" (give credentials as http://USER:PASSWORD@host, or headers in {HEADERS_ENV}: "
        "X-Scope-OrgID=TENANT for a multi-tenant Tempo, Authorization=Bearer%20TOKEN)"
    )


_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP token (RFC 9110)


def get(
    client: httpx.Client, url: str, params: dict[str, Any] | None = None, *, who: str
) -> httpx.Response:
    """GET ``url``; a backend that does not answer at all is a :class:`SourceError`."""
    import httpx

    from tracer._answers import AnswerTooLarge

    try:
        return client.get(url, params=params)
    except AnswerTooLarge as exc:
        raise SourceError(
            f"{who} at {url!r} answered more than {exc.limit_bytes} bytes; narrow the "
            "search (--limit, --since) or raise --max-answer-bytes"
        ) from exc
    except httpx.HTTPError as exc:
        raise SourceError(f"{who} at {url!r} did not answer ({exc}); is it running?") from exc


def json_of(resp: httpx.Response) -> Any:
    """The answer's JSON, or None when it is not JSON (an HTML page, a plain 404)."""
    try:
        return orjson.loads(resp.content)
    except orjson.JSONDecodeError:
        return None


def error_text(resp: httpx.Response) -> str:
    """The backend's own words about a failed request, on one line.

    Jaeger's api/v3 writes ``{"error": {"httpCode", "message"}}``, its v1 API
    ``{"errors": [{"code", "msg"}]}``, Tempo plain text.
    """
    body = json_of(resp)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:300]
        errors = body.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            return str(errors[0].get("msg") or errors[0])[:300]
    lines = resp.text.strip().splitlines()
    return lines[0][:300] if lines else resp.reason_phrase


def trace_ids_of(values: Collection[str]) -> list[str]:
    """Trace ids as 32 lower-case hex digits (hex of any width, or base64), sorted."""
    return sorted({tid for v in values if (tid := normalize_id(v, 32)) is not None})


@dataclass(frozen=True)
class Fetched:
    """One trace asked for by id: the parsed answer, or why there is none."""

    trace_id: str
    body: Any = None
    problem: str | None = None


def fetch_each(
    trace_ids: list[str], fetch: Callable[[str], Fetched], listener: Listener
) -> Iterator[Fetched]:
    """``fetch(id)`` for every id, :data:`FETCH_CONCURRENCY` at a time, as they finish.

    A request that raises (a timeout, a refused connection) becomes a
    :class:`Fetched` with its problem; progress goes to ``listener`` when more than
    :data:`PROGRESS_AFTER` traces are fetched.
    """
    total = len(trace_ids)
    pool = cf.ThreadPoolExecutor(max_workers=FETCH_CONCURRENCY, thread_name_prefix="hoptrace")
    try:
        futures = [pool.submit(_guarded, fetch, tid) for tid in trace_ids]
        for done, future in enumerate(cf.as_completed(futures), 1):
            if total > PROGRESS_AFTER:
                listener.fetched(done, total)
            yield future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _guarded(fetch: Callable[[str], Fetched], trace_id: str) -> Fetched:
    import httpx

    from tracer._answers import AnswerTooLarge

    try:
        return fetch(trace_id)
    except AnswerTooLarge as exc:
        return Fetched(trace_id, problem=f"larger than {exc.limit_bytes} bytes")
    except httpx.TimeoutException:
        return Fetched(trace_id, problem="timed out")
    except httpx.HTTPError as exc:
        return Fetched(trace_id, problem=f"failed ({type(exc).__name__})")


def answer(trace_id: str, resp: httpx.Response) -> Fetched:
    """A :class:`Fetched` from one answer: its JSON when 200, else its status."""
    if resp.status_code == 200:
        body = json_of(resp)
        if body is None:
            return Fetched(trace_id, problem="not JSON")
        return Fetched(trace_id, body)
    if resp.status_code == 404:
        return Fetched(trace_id, problem="not found (404)")
    return Fetched(trace_id, problem=f"answered {resp.status_code}")


def add_fetched(
    traceset: TraceSet,
    results: Iterator[Fetched],
    origin: str,
    total: int,
    check: Callable[[Fetched], None] | None = None,
) -> None:
    """Add each fetched trace to ``traceset``; count and describe the ones that failed.

    ``check`` looks at each good answer first (to note a partial trace, say).
    """
    note_problems(traceset, add_each(traceset, results, origin, check), origin, total)


def add_each(
    traceset: TraceSet,
    results: Iterator[Fetched],
    origin: str,
    check: Callable[[Fetched], None] | None = None,
) -> list[Fetched]:
    """Add each fetched trace to ``traceset``: the ones that could not be read."""
    problems: list[Fetched] = []
    for item in results:
        if item.problem is None:
            if check is not None:
                check(item)
            before = len(traceset.traces.get(item.trace_id, ()))
            added = add_object(item.body, traceset, origin)
            if added and len(traceset.traces.get(item.trace_id, ())) > before:
                continue
            item = Fetched(item.trace_id, problem="without spans")
        problems.append(item)
    return problems


def note_problems(traceset: TraceSet, problems: list[Fetched], origin: str, total: int) -> None:
    """Count the traces that could not be read and say why, in one line."""
    if not problems:
        return
    traceset.warnings.skipped_traces += len(problems)
    kinds = Counter(p.problem for p in problems)
    parts = ", ".join(f"{n} {kind}" for kind, n in kinds.most_common())
    example = min(p.trace_id for p in problems)
    traceset.warnings.note(
        f"{origin}: {len(problems)} of {total} traces could not be read ({parts}; "
        f"e.g. {example}); the others were analysed"
    )
