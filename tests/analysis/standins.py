"""Stand-ins for Grafana Tempo's and Jaeger's query APIs, on real HTTP (127.0.0.1).

They answer as the servers do, in the shapes, encodings, defaults and errors the
servers' own sources, docs and test fixtures show:

Tempo (github.com/grafana/tempo):
- ``docs/sources/tempo/api_docs/_index.md``: ``/api/search`` (``q``, ``start``/``end``
  in unix seconds, ``limit`` "Default is 20"), ``/api/traces/<id>``,
  ``/api/v2/traces/<id>``, ``/api/echo`` answers ``echo``, ``/api/status/buildinfo``.
- ``docs/sources/tempo/api_docs/pushing-spans-with-http.md``: a v2 trace body
  (``{"trace": {"resourceSpans": [...]}}``, base64 ``traceId``/``spanId``,
  ``"kind": "SPAN_KIND_SERVER"``, ``"status": {}``) and a search answer
  (hex ``traceID``, ``startTimeUnixNano`` as a string, ``metrics`` with
  ``inspectedBytes`` as a string, ``completedJobs``, ``totalJobs``).
- ``pkg/api/http.go`` ``ParseSearchRequest``: ``limit=0`` is "invalid limit: must be a
  positive number"; ``modules/frontend/search_handlers.go`` ``adjustLimit``: no limit
  means ``default_result_limit`` (20), one above ``max_result_limit`` is a 400 "limit N
  exceeds max limit M" (2.4 and later, PR #3340; ``searchsharding.go`` in 2.0-2.3
  capped it silently). ``modules/frontend/config.go``: ``max_result_limit`` 0 (none)
  until 2.10, 262144 from 3.0.
- ``modules/frontend/combiner/search.go``: the search quits once it holds ``limit``
  traces, so ``completedJobs`` stays below ``totalJobs``; ``most_recent=true``
  (``pkg/traceql/enum_hints.go``, 2.8+) keeps the newest; ``pkg/util/traceid.go``
  ``TraceIDToHexString`` drops leading zeros of search ids.
- ``pkg/tempopb/trace_utils.go`` ``MarshalToJSONV1``: ``/api/traces/<id>`` keeps the
  ``batches`` key; ``modules/frontend/combiner/trace_by_id.go``: an unknown trace is a
  404 with no body; ``cmd/tempo/app/app.go`` ``buildinfoHandler``: the
  ``PrometheusVersion`` JSON (``version``, ``revision``, ``branch``, ``buildUser``,
  ``buildDate``, ``goVersion``). Unknown paths: gorilla mux's ``404 page not found``.

Jaeger v2 (github.com/jaegertracing/jaeger,
``cmd/jaeger/internal/extension/jaegerquery/internal/apiv3/``):
- ``query_parser.go``: camelCase ``query.serviceName``, ``query.operationName``,
  ``query.startTimeMin``/``Max``, ``query.searchDepth`` (default 100) since 2.19 (PR
  #8625), the snake_case names as deprecated aliases, ``query.num_traces`` too; both
  times required ("query.startTimeMin and query.startTimeMax are required"); 2.18
  reads only snake_case ("query.start_time_min and query.start_time_max are required").
  ``GET /api/v3/services`` of a Jaeger holding no trace is ``{}`` (protobuf JSON leaves
  the empty list out: seen on the real Jaeger, tests/backends/test_jaeger.py).
- ``http_gateway.go``: answers ``{"result": <OTLP JSON>}``, errors as
  ``{"error": {"httpCode", "message"}}`` written by ``http.Error`` (text/plain, a
  trailing newline), no traces: 404 "No traces found"; ``snapshots/FindTraces.json``:
  hex ids, integer kinds. ``internal/storage/v2/memory/tenant.go`` ``findTraceAndIds``:
  the memory store walks its ring from the trace it stored last and stops at the
  search depth (checked against the real Jaeger in tests/backends/test_jaeger.py).
  The v1 ``/api/services`` and ``/api/traces/<id>``
  (``http_handler.go``) answer ``{"data": ..., "total", "limit", "offset", "errors"}``.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import hashlib
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from tests.synthetic import SEED_MS, chain_trace, to_jaeger_json, to_otlp_json
from tracer.spans.model import Span

_HANG = object()
_KINDS = {
    1: "SPAN_KIND_INTERNAL",
    2: "SPAN_KIND_SERVER",
    3: "SPAN_KIND_CLIENT",
    4: "SPAN_KIND_PRODUCER",
    5: "SPAN_KIND_CONSUMER",
}
_STATUS = {1: "STATUS_CODE_OK", 2: "STATUS_CODE_ERROR"}
_NOT_FOUND = (404, "text/plain; charset=utf-8", b"404 page not found\n")
Answer = tuple[int, str, bytes]


def _json(status: int, obj: Any) -> Answer:
    return status, "application/json", orjson.dumps(obj)


def _b64(hex_id: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_id)).decode()


def tempo_json(otlp: dict[str, Any]) -> dict[str, Any]:
    """OTLP JSON (hex ids, integer kinds) as Tempo's gogo-jsonpb writes it."""
    out = copy.deepcopy(otlp)
    for rs in out["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = _b64(span[key])
                kind = span.pop("kind", 0)
                if kind:
                    span["kind"] = _KINDS[kind]
                code = (span.get("status") or {}).get("code", 0)
                span["status"] = {"code": _STATUS[code]} if code else {}
    return out


@dataclass
class StoredTrace:
    """One trace a stand-in holds, in the forms the servers write."""

    trace_id: str
    spans: list[Span]

    @property
    def start_ns(self) -> int:
        return min(s.start_ns for s in self.spans)

    @property
    def root(self) -> Span:
        ids = {s.span_id for s in self.spans}
        return next(s for s in self.spans if s.parent_id not in ids)


@dataclass
class StandIn:
    """A backend on 127.0.0.1 holding ``traces``; ``requests`` records what it was asked."""

    traces: dict[str, StoredTrace] = field(default_factory=dict)
    #: trace id -> "503" (a failing backend), "hang" (never answers), "gone" (404)
    failures: dict[str, str] = field(default_factory=dict)
    #: trace id -> answers of 404 before the trace is there (spans still arriving)
    arrives_after: dict[str, int] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    #: headers every request must carry (a tenant, credentials), else 401 as Tempo's
    #: and Jaeger's auth middleware answer (dskit: "no org id" for a missing tenant)
    required_headers: dict[str, str] = field(default_factory=dict)
    url: str = ""
    _release: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def put(self, spans: list[Span]) -> None:
        self.traces[spans[0].trace_id] = StoredTrace(spans[0].trace_id, spans)

    def paths(self, prefix: str) -> list[str]:
        """The paths asked for that start with ``prefix``."""
        return [p for p, _ in self.requests if p.startswith(prefix)]

    def _trace(self, trace_id: str) -> StoredTrace | Any | None:
        """The stored trace, None when missing, or _HANG / an Answer for a failure."""
        with self._lock:
            if self.arrives_after.get(trace_id, 0) > 0:
                self.arrives_after[trace_id] -= 1
                return None
        failure = self.failures.get(trace_id)
        if failure == "hang":
            return _HANG
        if failure == "503":
            return (503, "text/plain; charset=utf-8", b"upstream connect error\n")
        if failure == "gone":
            return None
        return self.traces.get(trace_id)

    def answer(self, path: str, params: dict[str, str]) -> Answer | Any:
        raise NotImplementedError

    @contextmanager
    def running(self) -> Iterator[Any]:
        """Serve on a free 127.0.0.1 port for the ``with`` block; yields self."""
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                parts = urlsplit(self.path)
                params = {k: v[-1] for k, v in parse_qs(parts.query).items()}
                standin.requests.append((parts.path, params))
                missing = [
                    k for k, v in standin.required_headers.items() if self.headers.get(k) != v
                ]
                result = (
                    (401, "text/plain; charset=utf-8", b"no org id\n")
                    if missing
                    else standin.answer(parts.path, params)
                )
                if result is _HANG:
                    standin._release.wait()
                    return
                status, ctype, body = result
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._release.set()
            server.shutdown()
            server.server_close()


_COND = re.compile(r'^(resource\.service\.name|name|span\.[\w.]+)\s*(=|!=)\s*"((?:[^"\\]|\\.)*)"$')
_HINTS = re.compile(r"^(.*\})\s*with\s*\((.*)\)\s*$")


@dataclass
class TempoStandIn(StandIn):
    """Tempo's query frontend: search, trace by id (v2 and first path), build info."""

    version: str = "2.8.1"
    default_limit: int = 20
    max_limit: int = 0  # 0: none (Tempo's default before 3.0)
    #: 2.4+: a limit above max_result_limit is a 400; before, it was capped silently
    limit_error: bool = True
    #: the limit parameter does not reach Tempo (a proxy in front drops it)
    drops_limit: bool = False
    has_v2: bool = True  # /api/v2/traces/<id>: 2.6 and later
    knows_hints: bool = True  # TraceQL "with (...)": 2.4 and later
    traces_per_job: int = 5

    def answer(self, path: str, params: dict[str, str]) -> Answer | Any:
        if path == "/api/status/buildinfo":
            return _json(
                200,
                {
                    "version": self.version,
                    "revision": "a1b2c3d",
                    "branch": "HEAD",
                    "buildUser": "",
                    "buildDate": "",
                    "goVersion": "go1.24.4",
                },
            )
        if path == "/api/echo":
            return 200, "text/plain; charset=utf-8", b"echo"
        if path == "/api/search":
            return self._search(params)
        for prefix, v2 in (("/api/v2/traces/", True), ("/api/traces/", False)):
            if path.startswith(prefix) and (self.has_v2 or not v2):
                return self._by_id(path[len(prefix) :], v2)
        return _NOT_FOUND

    def _by_id(self, raw_id: str, v2: bool) -> Answer | Any:
        if not re.fullmatch(r"[0-9a-fA-F]{1,32}", raw_id):
            return 400, "text/plain; charset=utf-8", b"trace IDs can't be larger than 128 bits"
        found = self._trace(raw_id.lower().rjust(32, "0"))
        if found is None:
            return 404, "text/plain; charset=utf-8", b""
        if not isinstance(found, StoredTrace):
            return found
        trace = tempo_json(to_otlp_json(found.spans))
        if v2:
            return _json(200, {"trace": trace})
        return _json(200, {"batches": trace["resourceSpans"]})

    def _search(self, params: dict[str, str]) -> Answer:
        q = params.get("q", "{ }")
        hints = ""
        hinted = _HINTS.match(q)
        if hinted:
            if not self.knows_hints:
                return 400, "text/plain", b"invalid TraceQL query: parse error at line 1, col 5"
            q, hints = hinted.group(1), hinted.group(2)
        conditions = self._conditions(q)
        if conditions is None:
            return 400, "text/plain", b"invalid TraceQL query: parse error at line 1, col 3"
        limit = self.default_limit
        if "limit" in params and not self.drops_limit:
            limit = int(params["limit"])
            if limit == 0:
                return 400, "text/plain", b"invalid limit: must be a positive number"
            if self.max_limit and limit > self.max_limit:
                if self.limit_error:
                    message = f"limit {limit} exceeds max limit {self.max_limit}"
                    return 400, "text/plain", message.encode()
                limit = self.max_limit
        start_s, end_s = int(params.get("start", 0)), int(params.get("end", 2**32))
        most_recent = "most_recent=true" in hints.replace(" ", "")
        candidates = [
            t
            for t in self.traces.values()
            if start_s * 10**9 <= t.start_ns <= end_s * 10**9 and self._matches(t, conditions)
        ]
        # Jobs are shards of blocks, newest first when most_recent asks for it; the
        # combiner quits once it holds ``limit`` traces.
        if most_recent:
            candidates.sort(key=lambda t: t.start_ns, reverse=True)
        jobs = [
            candidates[i : i + self.traces_per_job]
            for i in range(0, max(len(self.traces), 1), self.traces_per_job)
        ]
        held: list[StoredTrace] = []
        completed = 0
        for job in jobs:
            held.extend(job)
            completed += 1
            if len(held) >= limit:
                break
        if most_recent:
            held.sort(key=lambda t: t.start_ns, reverse=True)
        metrics: dict[str, Any] = {"inspectedBytes": str(1000 * completed), "totalJobs": len(jobs)}
        if completed:
            metrics["completedJobs"] = completed  # jsonpb leaves out zero values
        return _json(200, {"traces": [self._meta(t) for t in held[:limit]], "metrics": metrics})

    def _conditions(self, q: str) -> list[tuple[str, str, str]] | None:
        inner = re.fullmatch(r"\{\s*(.*?)\s*\}", q.strip())
        if inner is None:
            return None
        if not inner.group(1):
            return []
        out = []
        for part in inner.group(1).split("&&"):
            m = _COND.match(part.strip())
            if m is None:
                return None
            out.append((m.group(1), m.group(2), re.sub(r"\\(.)", r"\1", m.group(3))))
        return out

    @staticmethod
    def _matches(trace: StoredTrace, conditions: list[tuple[str, str, str]]) -> bool:
        def value(span: Span, key: str) -> Any:
            if key == "resource.service.name":
                return span.service
            if key == "name":
                return span.name
            return span.attributes.get(key[len("span.") :])

        return any(
            all((str(value(s, k)) == v) == (op == "=") for k, op, v in conditions)
            for s in trace.spans
        )

    @staticmethod
    def _meta(trace: StoredTrace) -> dict[str, Any]:
        root = trace.root
        return {
            "traceID": trace.trace_id.lstrip("0"),
            "rootServiceName": root.service,
            "rootTraceName": root.name,
            "startTimeUnixNano": str(trace.start_ns),
            "durationMs": (root.end_ns - root.start_ns) // 1_000_000,
            "spanSets": [{"spans": [{"spanID": root.span_id}], "matched": 1}],
        }


def _error(status: int, message: str) -> Answer:
    # http.Error: text/plain and a trailing newline, around the JSON of GRPCGatewayError.
    body = orjson.dumps({"error": {"httpCode": status, "message": message}}) + b"\n"
    return status, "text/plain; charset=utf-8", body


def _v3_result(otlp: dict[str, Any]) -> Answer:
    # jsonpb writes it with no Content-Type set: Go's sniffing makes it text/plain (as
    # the real Jaeger answers, tests/backends/test_jaeger.py).
    return 200, "text/plain; charset=utf-8", orjson.dumps({"result": otlp})


@dataclass
class JaegerStandIn(StandIn):
    """Jaeger v2's query service: api/v3 search and trace by id, v1 services and trace."""

    #: (2, 19) and later read camelCase first, snake_case as aliases; before, snake_case
    version: tuple[int, int] = (2, 20)
    has_v3: bool = True
    #: the v1 ``/api/services`` and ``/api/traces`` (removed on Jaeger's main after 2.20)
    has_v1: bool = True
    #: raw OTLP JSON traces by id, served as they are (a real server's fixture)
    raw: dict[str, dict[str, Any]] = field(default_factory=dict)

    def _services(self) -> list[str]:
        return sorted({s.service for t in self.traces.values() for s in t.spans})

    def answer(self, path: str, params: dict[str, str]) -> Answer | Any:
        if path == "/api/v3/services" and self.has_v3:
            names = self._services()  # protobuf JSON leaves an empty list out: {}
            return _json(200, {"services": names} if names else {})
        if not self.has_v1 and (path == "/api/services" or path.startswith("/api/traces")):
            return _NOT_FOUND
        if path == "/api/services":
            names = self._services()
            return _json(
                200, {"data": names, "total": len(names), "limit": 0, "offset": 0, "errors": None}
            )
        if path == "/api/v3/traces" and self.has_v3:
            return self._find(params)
        if path == "/api/traces":  # the v1 search (removed after 2.20)
            found = [
                t
                for t in self.traces.values()
                if any(s.service == params.get("service") for s in t.spans)
            ][: int(params.get("limit") or 20)]
            spans = [s for t in found for s in t.spans]
            return _json(200, {**to_jaeger_json(spans), "total": 0, "limit": 0, "offset": 0})
        if path.startswith("/api/v3/traces/") and self.has_v3:
            return self._get(path.rsplit("/", 1)[1], v3=True)
        if path.startswith("/api/traces/"):
            return self._get(path.rsplit("/", 1)[1], v3=False)
        return _NOT_FOUND

    def _param(self, q: dict[str, str], camel: str, snake: str) -> tuple[str, str]:
        if self.version >= (2, 19) and q.get(camel):
            return q[camel], camel
        return q.get(snake, ""), snake

    def _find(self, q: dict[str, str]) -> Answer:
        new = self.version >= (2, 19)
        service, _ = self._param(q, "query.serviceName", "query.service_name")
        operation, _ = self._param(q, "query.operationName", "query.operation_name")
        tmin, _ = self._param(q, "query.startTimeMin", "query.start_time_min")
        tmax, _ = self._param(q, "query.startTimeMax", "query.start_time_max")
        if not tmin or not tmax:
            names = ("query.startTimeMin", "query.startTimeMax") if new else (
                "query.start_time_min", "query.start_time_max")  # fmt: skip
            return _error(400, f"{names[0]} and {names[1]} are required")
        depth, _ = self._param(q, "query.searchDepth", "query.search_depth")
        depth = depth or q.get("query.num_traces", "") or "100"
        lo = dt.datetime.fromisoformat(tmin).timestamp() * 1e9
        hi = dt.datetime.fromisoformat(tmax).timestamp() * 1e9
        found = [  # the last stored first, as the memory store walks its ring
            t
            for t in reversed(self.traces.values())
            if lo <= t.start_ns <= hi
            and any(
                s.service == service and (not operation or s.name == operation) for s in t.spans
            )
        ][: int(depth)]
        if not found:
            return _error(404, "No traces found")
        merged = [rs for t in found for rs in to_otlp_json(t.spans)["resourceSpans"]]
        return _v3_result({"resourceSpans": merged})

    def _get(self, trace_id: str, v3: bool) -> Answer | Any:
        tid = trace_id.lower().rjust(32, "0")
        if tid in self.raw and v3:
            return _json(200, self.raw[tid])
        found = self._trace(tid)
        if isinstance(found, StoredTrace):
            if v3:
                return _v3_result(to_otlp_json(found.spans))
            return _json(200, {**to_jaeger_json(found.spans), "total": 0, "limit": 0, "offset": 0})
        if found is None:
            if v3:
                return _error(404, "No traces found")
            body = {"data": None, "total": 0, "limit": 0, "offset": 0,
                    "errors": [{"code": 404, "msg": "trace not found"}]}  # fmt: skip
            return _json(404, body)
        if found is not _HANG and v3:
            return _error(500, "storage unavailable")
        return found


def recent_traces(count: int, *, first: int = 0) -> list[list[Span]]:
    """``count`` seven-stage traces that started within the last minutes, newest first;
    stage times vary, ids are random-looking, some with leading zeros."""
    now_ns = time.time_ns()
    out = []
    for i in range(first, first + count):
        digest = hashlib.sha256(f"trace {i}".encode()).hexdigest()[:32]
        trace_id = ("000" + digest[3:]) if i % 4 == 0 else digest
        ms = {**SEED_MS, "auth": 50.0 + 7 * (i % 11), "inference": 800.0 + 37 * (i % 13)}
        out.append(
            chain_trace(trace_id, now_ns - (i + 1) * 2_000_000_000, ms, model_ttft_ms=90.0 + i)
        )
    return out


def numbers_of(result: Any) -> tuple[Any, ...]:
    """What must be equal between two sources of the same traces."""
    return (
        result.traces,
        result.spans,
        [round(v, 6) for v in (result.e2e.p50, result.e2e.p90, result.e2e.p99, result.e2e.mean)],
        round(result.ttft.p50, 6) if result.ttft is not None else None,
        [
            (g.name, round(g.share, 9), round(g.tail_share, 9), round(g.p90_ms, 6))
            for g in result.groups
        ],  # fmt: skip
    )


def otlp_file(tmp_path: Any, traces: list[list[Span]]) -> Any:
    """The traces as one OTLP JSON-lines file."""
    path = tmp_path / "traces.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(to_otlp_json(t)) for t in traces))
    return path


class Recorder:
    """A loader listener that keeps what it hears."""

    def __init__(self) -> None:
        self.found_lines: list[str] = []
        self.progress: list[tuple[int, int]] = []

    def found(self, message: str) -> None:
        self.found_lines.append(message)

    def fetched(self, done: int, total: int) -> None:
        self.progress.append((done, total))
