"""hoptrace's embedded collector: an OTLP/HTTP receiver and a durable span store.

``hoptrace collect`` runs it; :class:`BackgroundCollector` runs it inside a process.
Spans that can never be stored are rejected one by one (OTLP partial success); past
``max_memory`` held by requests in flight, new requests get 503 with ``Retry-After``.
Prompt and completion attributes are dropped at ingest unless ``keep_content`` is set.
docs/collector.md has the whole behaviour.
``otelcol-config.yaml`` beside this file is the OpenTelemetry Collector configuration
used by docker-compose.
"""

from __future__ import annotations

from collector.memory import DEFAULT_MAX_MEMORY_BYTES
from collector.receiver import DEFAULT_MAX_BODY_BYTES, OtlpReceiver
from collector.server import BackgroundCollector, free_port, serve
from collector.store import SpanStore, default_store_path
from collector.validate import MAX_VALUE_DEPTH

__all__ = [
    "BackgroundCollector",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_MEMORY_BYTES",
    "MAX_VALUE_DEPTH",
    "OtlpReceiver",
    "SpanStore",
    "default_store_path",
    "free_port",
    "serve",
]
