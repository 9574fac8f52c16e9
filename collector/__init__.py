"""hoptrace's embedded collector: an OTLP/HTTP receiver and a durable span store.

``hoptrace collect`` runs it; :class:`BackgroundCollector` runs it inside a process.
Spans that can never be stored are rejected one by one (OTLP partial success); past
``max_memory`` held by requests in flight, new requests get 503 with ``Retry-After``.
Prompt and completion attributes are dropped at ingest unless ``keep_content`` is set.
A :class:`Retention` (``retention=``) bounds the store by age and size, dropping the
oldest whole traces first. docs/collector.md has the whole behaviour.
``otelcol-config.yaml`` beside this file is the OpenTelemetry Collector configuration
used by docker-compose.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracer._lazy import exports

if TYPE_CHECKING:
    from collector.memory import DEFAULT_MAX_MEMORY_BYTES
    from collector.receiver import DEFAULT_MAX_BODY_BYTES, OtlpReceiver
    from collector.retention import Retention, resolve_retention
    from collector.server import BackgroundCollector, free_port, listening, serve
    from collector.store import SpanStore, default_store_path
    from collector.validate import MAX_VALUE_DEPTH

#: Where each name lives: imported on first use (PEP 562), so that reading a span store
#: (``collector.store``) does not import the receiver's server stack (uvicorn, protobuf).
_HOME = {
    "BackgroundCollector": "collector.server",
    "DEFAULT_MAX_BODY_BYTES": "collector.receiver",
    "DEFAULT_MAX_MEMORY_BYTES": "collector.memory",
    "MAX_VALUE_DEPTH": "collector.validate",
    "OtlpReceiver": "collector.receiver",
    "Retention": "collector.retention",
    "SpanStore": "collector.store",
    "default_store_path": "collector.store",
    "free_port": "collector.server",
    "listening": "collector.server",
    "resolve_retention": "collector.retention",
    "serve": "collector.server",
}

__all__ = [
    "BackgroundCollector",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_MEMORY_BYTES",
    "MAX_VALUE_DEPTH",
    "OtlpReceiver",
    "Retention",
    "SpanStore",
    "default_store_path",
    "free_port",
    "listening",
    "resolve_retention",
    "serve",
]


__getattr__, __dir__ = exports(__name__, _HOME)
