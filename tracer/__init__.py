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

from tracer import attributes
from tracer._errors import (
    ConfigError,
    HoptraceError,
    NoUsableDataError,
    ReceiverError,
    SourceError,
)
from tracer._genai import genai_request, record_engine_latency, record_usage
from tracer._instrument import instrument_fastapi, instrument_httpx
from tracer._setup import force_flush, is_configured, setup, shutdown
from tracer._stage import mark_first_token, stage

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "HoptraceError",
    "NoUsableDataError",
    "ReceiverError",
    "SourceError",
    "attributes",
    "force_flush",
    "genai_request",
    "instrument_fastapi",
    "instrument_httpx",
    "is_configured",
    "mark_first_token",
    "record_engine_latency",
    "record_usage",
    "setup",
    "shutdown",
    "stage",
]
