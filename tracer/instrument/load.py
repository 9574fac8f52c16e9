"""What a model of the load reads in the traces: CPU, cores, host and finite pools.

Resource attributes, set by :func:`tracer.setup` unless the application (or
``OTEL_RESOURCE_ATTRIBUTES``) already gives them:

- ``host.name`` and ``service.instance.id`` (OpenTelemetry semantic conventions): the
  host the process shares with others, and the process itself (a UUID v4 per process).
- ``hoptrace.host.cpus``: the host's logical CPUs (``os.cpu_count()``).
- ``hoptrace.process.cpus``: the CPUs the process may use: ``os.sched_getaffinity``,
  bounded by the cgroup v2 ``cpu.max`` quota of its cgroup and every ancestor (a
  double: ``150000 100000`` is 1.5 cores).

Server spans of :func:`tracer.instrument_fastapi` repeat those four (span stores,
hoptrace's included, commonly keep only ``service.name`` of the resource, and a load
model needs to tell two instances of one service apart), and carry:

- ``hoptrace.process.cpu_ns``: process CPU time (``time.process_time_ns()``, user and
  system, every thread) from the span's start to its end. A thread's CPU clock would
  not tell requests apart either (an async server runs them all on its event-loop
  thread, between awaits) and would miss the other threads' work (the exporter's, a
  thread pool's); the process delta counts all of it, and with it the CPU of the
  requests running at the same time, so with concurrency it bounds a request's demand
  from above.
- ``hoptrace.process.cpu_total_ns``: the process's cumulative CPU at the span's end.
  A load model takes the spans of one ``service.instance.id``: the difference of two
  spans' totals over the difference of their end times is the process's busy cores
  over that window, and over the requests that ended in it, its CPU per request.

Spans that held a slot of a finite pool (:func:`record_pool`): ``hoptrace.pool.name``,
``hoptrace.pool.size`` and ``hoptrace.pool.wait_ns`` (how long the request waited for
the slot). Engines that publish their queue (vLLM's ``gen_ai.latency.time_in_queue``)
need nothing more.

Reading the process CPU costs about 0.23 us, twice a request; the middleware adds about
10 us a request in all (docs/analysis.md, section 10, has the measurements).
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span

from tracer import attributes as attrs

__all__ = [
    "CpuMiddleware",
    "load_resource_attributes",
    "process_cpus",
    "process_identity",
    "record_pool",
    "set_process_cpu",
]

_logger = logging.getLogger(__name__)
_CGROUP_ROOT = Path("/sys/fs/cgroup")
_PROC_CGROUP = Path("/proc/self/cgroup")


def _quota_cores(cpu_max: Path) -> float | None:
    """Cores allowed by one cgroup v2 ``cpu.max`` (``"max 100000"``: no limit)."""
    try:
        quota, _, period = cpu_max.read_text().strip().partition(" ")
        if quota == "max":
            return None
        cores = int(quota) / int(period or "100000")
    except (OSError, ValueError, ZeroDivisionError):
        return None
    return cores if cores > 0 else None


def process_cpus(cgroup_root: Path = _CGROUP_ROOT, proc_cgroup: Path = _PROC_CGROUP) -> float:
    """The CPUs this process may use: its affinity, bounded by cgroup v2 quotas.

    Every ``cpu.max`` from the process's cgroup up to ``cgroup_root`` applies; the
    smallest wins. Without affinity support, ``os.cpu_count()``.

    Args:
        cgroup_root: where the cgroup v2 hierarchy is mounted.
        proc_cgroup: the process's cgroup membership file.
    """
    try:
        cpus = float(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        cpus = float(os.cpu_count() or 1)
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return cpus
    relative = next((line[3:] for line in lines if line.startswith("0::")), None)
    if relative is None:
        return cpus
    folder = cgroup_root / relative.strip().lstrip("/")
    while True:
        cores = _quota_cores(folder / "cpu.max")
        if cores is not None:
            cpus = min(cpus, cores)
        if folder == cgroup_root or cgroup_root not in folder.parents:
            break
        folder = folder.parent
    return cpus


def load_resource_attributes(present: Mapping[str, Any]) -> dict[str, Any]:
    """The load model's resource attributes that ``present`` does not already have."""
    out: dict[str, Any] = {}
    if attrs.HOST_NAME not in present:
        out[attrs.HOST_NAME] = socket.gethostname()
    if attrs.SERVICE_INSTANCE_ID not in present:
        out[attrs.SERVICE_INSTANCE_ID] = str(uuid.uuid4())
    if attrs.HOST_CPUS not in present:
        out[attrs.HOST_CPUS] = os.cpu_count() or 1
    if attrs.PROCESS_CPUS not in present:
        out[attrs.PROCESS_CPUS] = process_cpus()
    return out


def record_pool(name: str, size: int, wait_ns: int, span: Span | None = None) -> None:
    """Record on ``span`` (the current span when omitted) that it held a slot of the
    pool ``name`` of ``size`` slots after waiting ``wait_ns`` for it; never raises.

    Call it once the slot is held, on the span that covers the time it is held::

        waited = time.perf_counter_ns()
        await pool.acquire()
        tracer.record_pool("gateway", 8, time.perf_counter_ns() - waited)
    """
    target = span if span is not None else trace.get_current_span()
    try:
        if target.is_recording():
            target.set_attributes(
                {
                    attrs.POOL_NAME: name,
                    attrs.POOL_SIZE: int(size),
                    attrs.POOL_WAIT_NS: max(int(wait_ns), 0),
                }
            )
    except Exception:  # telemetry never breaks the app
        _logger.debug("could not record the pool on a span", exc_info=True)


#: The resource attributes a server span repeats (span stores, hoptrace's included,
#: commonly keep only ``service.name`` of the resource).
_REPEATED = (attrs.SERVICE_INSTANCE_ID, attrs.HOST_NAME, attrs.HOST_CPUS, attrs.PROCESS_CPUS)
_defaults: dict[str, Any] | None = None
_repeated: tuple[object, dict[str, Any]] = (None, {})


def _process_defaults() -> dict[str, Any]:
    """This process's load attributes, for a provider whose resource lacks them."""
    global _defaults
    if _defaults is None:
        _defaults = load_resource_attributes({})
    return _defaults


def process_identity(span: Span) -> dict[str, Any]:
    """The instance, host and cores a server span repeats: its resource's values, this
    process's own where the resource has none (a provider not made by ``setup()``)."""
    global _repeated
    resource = getattr(span, "resource", None)
    cached_for, cached = _repeated
    if resource is cached_for and resource is not None:
        return cached
    present = dict(getattr(resource, "attributes", None) or {})
    out = {key: present[key] for key in _REPEATED if key in present}
    if len(out) < len(_REPEATED):
        defaults = _process_defaults()
        out.update({key: defaults[key] for key in _REPEATED if key not in out})
    _repeated = (resource, out)
    return out


def set_process_cpu(span: Span, start_cpu_ns: int) -> None:
    """The identity and CPU attributes, in one call (the SDK takes its lock and checks
    the values once per call: about 1 us a call, 0.35 us an attribute)."""
    now = time.process_time_ns()
    try:
        if span.is_recording():
            span.set_attributes(
                {
                    **process_identity(span),
                    attrs.PROCESS_CPU_NS: now - start_cpu_ns,
                    attrs.PROCESS_CPU_TOTAL_NS: now,
                }
            )
    except Exception:
        _logger.debug("could not record the process CPU on a span", exc_info=True)


class CpuMiddleware:
    """ASGI middleware, inside the server span's middleware, that writes the load
    attributes on that span (the process's identity, cores and CPU) at the response's
    last body message (the server span ends as it is sent), or when the app fails
    before sending it."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        span = trace.get_current_span()
        if not span.is_recording():
            await self.app(scope, receive, send)
            return
        start_cpu_ns = time.process_time_ns()
        pending = True

        async def cpu_send(message: dict[str, Any]) -> None:
            nonlocal pending
            if (
                pending
                and message.get("type") == "http.response.body"
                and not message.get("more_body", False)
            ):
                pending = False
                set_process_cpu(span, start_cpu_ns)
            await send(message)

        try:
            await self.app(scope, receive, cpu_send)
        finally:
            if pending:
                set_process_cpu(span, start_cpu_ns)
