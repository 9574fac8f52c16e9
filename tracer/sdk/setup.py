"""``setup()``, ``shutdown()`` and friends: an OpenTelemetry SDK pipeline in one call.

Environment (standard variables are honoured, not renamed; a keyword wins over its
variable):

==============================================  ===================  =========================
variable                                        keyword              default
==============================================  ===================  =========================
``OTEL_SERVICE_NAME``                           ``service_name``     ``unknown_service``
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``,         ``endpoint``         ``http://127.0.0.1:4318``
``OTEL_EXPORTER_OTLP_ENDPOINT``                                      (the embedded collector)
``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``,         ``protocol``         ``http/protobuf``
``OTEL_EXPORTER_OTLP_PROTOCOL``                                      (or ``http/json``, ``grpc``)
``OTEL_TRACES_SAMPLER`` / ``..._ARG``           ``sampler``,         parentbased_always_on
                                                ``sample_ratio``
``OTEL_SDK_DISABLED``                           ``disabled``         false
``OTEL_BSP_*``                                  (the batch processor reads them)
==============================================  ===================  =========================
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import Sampler

from tracer._errors import ConfigError

if TYPE_CHECKING:
    from tracer.sdk.batch import SpanDrops

__all__ = [
    "DEFAULT_ENDPOINT",
    "PROMPT_EXPORT_DELAY_MS",
    "dropped_spans",
    "force_flush",
    "is_configured",
    "make_resource",
    "prefer_prompt_export",
    "setup",
    "shutdown",
]

_logger = logging.getLogger(__name__)
DEFAULT_ENDPOINT = "http://127.0.0.1:4318"
_PROTOCOLS = ("http/protobuf", "http/json", "grpc")

_lock = threading.Lock()
_provider: TracerProvider | None = None
_processor: SpanProcessor | None = None
_exporter: SpanExporter | None = None
#: Seconds :func:`shutdown` waits for the last spans to leave before it drops them.
SHUTDOWN_TIMEOUT_S = 2.0


#: Batch export delay for short interactive runs (demo, bench, serve): their spans reach
#: the store within a fraction of a second instead of the SDK's default 5 s.
PROMPT_EXPORT_DELAY_MS = 200


def prefer_prompt_export() -> None:
    """Set ``OTEL_BSP_SCHEDULE_DELAY`` to :data:`PROMPT_EXPORT_DELAY_MS` unless the user
    set it; in the environment, so the service processes started afterwards get it too."""
    os.environ.setdefault("OTEL_BSP_SCHEDULE_DELAY", str(PROMPT_EXPORT_DELAY_MS))


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() == "true"


def traces_endpoint(endpoint: str | None, protocol: str) -> str:
    """Resolve the OTLP traces endpoint the way the OpenTelemetry exporters do.

    A keyword endpoint and ``OTEL_EXPORTER_OTLP_ENDPOINT`` are base URLs (``/v1/traces``
    is appended for HTTP); ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is used as it is.
    """
    if endpoint is None:
        signal = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        if signal:
            return signal
        endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or DEFAULT_ENDPOINT
    if not endpoint.startswith(("http://", "https://")):
        raise ConfigError(
            f"endpoint must be an http:// or https:// URL, got {endpoint!r}; "
            "for example http://127.0.0.1:4318"
        )
    if protocol == "grpc" or endpoint.rstrip("/").endswith("/v1/traces"):
        return endpoint
    return endpoint.rstrip("/") + "/v1/traces"


def _make_exporter(endpoint: str | None, protocol: str | None, headers: dict[str, str] | None):
    proto = (
        protocol
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    if proto not in _PROTOCOLS:
        raise ConfigError(f"protocol must be one of {', '.join(_PROTOCOLS)}, got {proto!r}")
    url = traces_endpoint(endpoint, proto)
    if proto == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        return GrpcExporter(endpoint=url, headers=headers)
    if proto == "http/json":
        from tracer.sdk.json_export import JsonSpanExporter

        return JsonSpanExporter(url, headers=headers)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=url, headers=headers)


def make_resource(
    service_name: str | None, resource_attributes: dict[str, Any] | None = None
) -> Resource:
    """The resource :func:`setup` gives its provider: ``OTEL_RESOURCE_ATTRIBUTES``,
    ``resource_attributes`` and ``service_name`` (the later wins), then the load
    model's attributes none of them gave (``tracer/instrument/load.py``)."""
    from tracer.instrument.load import load_resource_attributes

    attributes: dict[str, Any] = dict(resource_attributes or {})
    if service_name:
        attributes[SERVICE_NAME] = service_name
    resource = Resource.create(attributes)
    extra = load_resource_attributes(resource.attributes)
    return resource.merge(Resource(extra)) if extra else resource


def setup(
    service_name: str | None = None,
    *,
    endpoint: str | None = None,
    protocol: str | None = None,
    headers: dict[str, str] | None = None,
    sampler: Sampler | None = None,
    sample_ratio: float | None = None,
    resource_attributes: dict[str, str] | None = None,
    exporter: SpanExporter | None = None,
    disabled: bool | None = None,
) -> trace.TracerProvider:
    """Install a global tracer provider that exports spans over OTLP.

    Args:
        service_name: ``service.name`` of this process (else ``OTEL_SERVICE_NAME``).
        endpoint: OTLP base URL (else the ``OTEL_EXPORTER_OTLP_*`` variables, else the
            embedded collector on 127.0.0.1:4318).
        protocol: ``http/protobuf`` (default), ``http/json`` (hoptrace's own exporter:
            about a ninth of the protobuf encoder's CPU a span, and queued spans the
            garbage collector does not walk; docs/overhead.md) or ``grpc``.
        headers: extra export headers, e.g. ``{"authorization": "Bearer ..."}``.
        sampler: a sampler (else ``OTEL_TRACES_SAMPLER``).
        sample_ratio: keep this share of the traces (0..1) with a consistent
            probability sampler that writes its threshold in the trace state
            (``ot=th:...``; ``tracer.sampling.samplers.ConsistentProbabilitySampler``), so the
            analyzer weights each kept trace by what it stands for (docs/sampling.md).
            Else ``OTEL_TRACES_SAMPLER=parentbased_traceidratio`` and
            ``OTEL_TRACES_SAMPLER_ARG`` give the same sampler.
        resource_attributes: more resource attributes. ``host.name``,
            ``service.instance.id``, ``hoptrace.host.cpus`` and ``hoptrace.process.cpus``
            are added unless given here or in ``OTEL_RESOURCE_ATTRIBUTES``
            (``tracer/instrument/load.py``).
        exporter: use this exporter instead of OTLP (spans still go through a batch
            processor: ``tracer.sdk.batch``'s for a ``JsonSpanExporter``, the SDK's
            ``BatchSpanProcessor`` for any other).
        disabled: install a no-op provider (else ``OTEL_SDK_DISABLED``).

    Returns:
        The installed provider. A second call warns and returns the first provider.

    Raises:
        ConfigError: a bad endpoint, protocol or sample ratio, or both ``sampler`` and
            ``sample_ratio``.
    """
    global _provider, _processor, _exporter
    if sampler is not None and sample_ratio is not None:
        raise ConfigError("give sampler or sample_ratio, not both")
    with _lock:
        if _provider is not None:
            warnings.warn(
                "tracer.setup() was called again; keeping the first configuration "
                "(call tracer.shutdown() first to reconfigure)",
                RuntimeWarning,
                stacklevel=2,
            )
            return _provider
        if disabled is None:
            disabled = _env_true("OTEL_SDK_DISABLED")
        if disabled:
            noop = trace.NoOpTracerProvider()
            trace.set_tracer_provider(noop)
            return noop
        resource = make_resource(service_name, resource_attributes)
        span_exporter = exporter or _make_exporter(endpoint, protocol, headers)
        from tracer.sampling.samplers import (
            ConsistentProbabilitySampler,
            PresetIdGenerator,
            default_sampler,
        )
        from tracer.sdk.batch import RoutingSpanProcessor, SnapshotBatchProcessor
        from tracer.sdk.json_export import JsonSpanExporter

        if sample_ratio is not None:
            try:
                sampler = ConsistentProbabilitySampler(sample_ratio)
            except ValueError as e:
                raise ConfigError(str(e)) from None

        processor: SpanProcessor
        if isinstance(span_exporter, JsonSpanExporter):
            # Snapshots instead of ReadableSpans in the queue: the garbage collector's
            # full collections stay rare (tracer/sdk/batch.py, docs/overhead.md).
            processor = SnapshotBatchProcessor(span_exporter)
        else:
            processor = BatchSpanProcessor(span_exporter)
        chosen = sampler or default_sampler()
        provider = TracerProvider(
            resource=resource,
            sampler=chosen,
            active_span_processor=RoutingSpanProcessor(),
            # a request's root decided before its server span: tracer/sampling/unsampled.py
            id_generator=PresetIdGenerator()
            if isinstance(chosen, ConsistentProbabilitySampler)
            else None,
        )
        provider.add_span_processor(processor)
        trace.set_tracer_provider(provider)
        if trace.get_tracer_provider() is not provider:
            warnings.warn(
                "another global tracer provider was already installed; hoptrace's "
                "spans go to that one",
                RuntimeWarning,
                stacklevel=2,
            )
        _provider, _processor, _exporter = provider, processor, span_exporter
        return provider


def is_configured() -> bool:
    """True after :func:`setup` and before :func:`shutdown`."""
    return _provider is not None


def _within(timeout_s: float, work: Callable[[], object]) -> tuple[bool, object]:
    """Run ``work`` on a helper thread: (True, its result) when it ends within
    ``timeout_s``, else (False, None) and it goes on alone (a daemon thread)."""
    box: list[object] = []

    def run() -> None:
        try:
            box.append(work())
        except Exception:
            _logger.warning("hoptrace: exporting the last spans failed", exc_info=True)
            box.append(False)

    helper = threading.Thread(target=run, name="hoptrace-flush", daemon=True)
    helper.start()
    helper.join(timeout_s)
    return (not helper.is_alive(), box[0] if box else None)


def dropped_spans() -> SpanDrops | None:
    """The spans the pipeline :func:`setup` installed has dropped so far, by cause
    (``queue_full``, ``export_failed``, ``snapshot_failed``, ``total``).

    None before :func:`setup`, and for the ``http/protobuf`` and ``grpc`` protocols,
    whose processor is the SDK's own (it counts in its own metrics).
    """
    drops = getattr(_processor, "drops", None)
    return drops if drops is not None and hasattr(drops, "total") else None


def force_flush(timeout_millis: int = 30_000) -> bool:
    """Export every finished span now; True when all were exported within
    ``timeout_millis`` (an export still retrying then goes on in the background)."""
    provider = _provider or trace.get_tracer_provider()
    flush = getattr(provider, "force_flush", None)
    if flush is None:
        return True
    done, result = _within(timeout_millis / 1000, lambda: flush(timeout_millis))
    return done and bool(result)


def _queued(processor: SpanProcessor | None) -> int | None:
    """Spans still waiting in ``processor``'s queue, when it tells (best effort)."""
    inner = getattr(processor, "_batch_processor", processor)
    queue = getattr(inner, "_queue", None)
    try:
        return len(queue) if queue is not None else None
    except TypeError:
        return None


def shutdown(timeout_s: float = SHUTDOWN_TIMEOUT_S) -> None:
    """Flush and shut down the provider :func:`setup` installed (safe to call twice).

    The last spans get ``timeout_s`` seconds (:data:`SHUTDOWN_TIMEOUT_S`) to leave;
    past it, with the collector down or silent, the exporter is stopped, what is left
    is dropped and counted in one warning, and the process can end on time.
    """
    global _provider, _processor, _exporter
    with _lock:
        if _provider is None:
            return
        provider, processor, exporter = _provider, _processor, _exporter
        _provider, _processor, _exporter = None, None, None
        done, _ = _within(timeout_s, provider.shutdown)
        if not done:
            left = _queued(processor)
            if exporter is not None:
                with contextlib.suppress(Exception):
                    exporter.shutdown()  # stops its retries and closes its connection
            _logger.warning(
                "hoptrace: the collector did not take the last spans within %g s; %s "
                "dropped at shutdown",
                timeout_s,
                f"{left} spans were" if left is not None else "the spans still queued were",
            )
