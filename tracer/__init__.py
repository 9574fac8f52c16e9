"""hoptrace's tracer: split every request into stages and see where the time goes.

    import tracer
    tracer.setup(service_name="gateway")
    tracer.instrument_fastapi(app, stage="gateway")
    client = tracer.instrument_httpx(httpx.AsyncClient())

    @tracer.stage("auth")
    async def verify_key(key: str) -> None: ...

    with tracer.stage("context"):
        ...

The analyzer lives in ``tracer.analysis``; the command line in ``tracer.cli``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tracer import attributes
from tracer._errors import (
    ConfigError,
    HoptraceError,
    NoUsableDataError,
    ReceiverError,
    SourceError,
)

if TYPE_CHECKING:
    from tracer.instrument.genai import genai_request, record_engine_latency, record_usage
    from tracer.instrument.load import record_pool
    from tracer.instrument.stage import mark_first_token, stage
    from tracer.instrument.web import instrument_fastapi, instrument_httpx
    from tracer.sdk.setup import dropped_spans, force_flush, is_configured, setup, shutdown

__version__ = "0.1.0"

# The instrumentation API loads the OpenTelemetry SDK and httpx on first use, so that
# the analyzer, the collector and the command line, which import ``tracer.*``
# submodules, do not pay for it.
_LAZY = {
    "dropped_spans": "tracer.sdk.setup",
    "force_flush": "tracer.sdk.setup",
    "genai_request": "tracer.instrument.genai",
    "instrument_fastapi": "tracer.instrument.web",
    "instrument_httpx": "tracer.instrument.web",
    "is_configured": "tracer.sdk.setup",
    "mark_first_token": "tracer.instrument.stage",
    "record_engine_latency": "tracer.instrument.genai",
    "record_pool": "tracer.instrument.load",
    "record_usage": "tracer.instrument.genai",
    "setup": "tracer.sdk.setup",
    "shutdown": "tracer.sdk.setup",
    "stage": "tracer.instrument.stage",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tracer' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ConfigError",
    "HoptraceError",
    "NoUsableDataError",
    "ReceiverError",
    "SourceError",
    "attributes",
    "dropped_spans",
    "force_flush",
    "genai_request",
    "instrument_fastapi",
    "instrument_httpx",
    "is_configured",
    "mark_first_token",
    "record_engine_latency",
    "record_pool",
    "record_usage",
    "setup",
    "shutdown",
    "stage",
]
