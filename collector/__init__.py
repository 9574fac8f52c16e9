"""hoptrace's embedded collector: an OTLP/HTTP receiver and a durable span store.

``hoptrace collect`` runs it; :class:`BackgroundCollector` runs it inside a process.
Prompt and completion attributes are dropped at ingest unless ``keep_content`` is set.
``otelcol-config.yaml`` beside this file is the OpenTelemetry Collector configuration
used by docker-compose.
"""

from __future__ import annotations

from collector.receiver import DEFAULT_MAX_BODY_BYTES, OtlpReceiver
from collector.server import BackgroundCollector, free_port, serve
from collector.store import SpanStore, default_store_path

__all__ = [
    "BackgroundCollector",
    "DEFAULT_MAX_BODY_BYTES",
    "OtlpReceiver",
    "SpanStore",
    "default_store_path",
    "free_port",
    "serve",
]
