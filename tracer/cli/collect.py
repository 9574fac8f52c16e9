"""``hoptrace collect``: the embedded OTLP/HTTP receiver."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tracer._errors import ConfigError
from tracer.cli._common import store_option

if TYPE_CHECKING:
    from collector.store import SpanStore

__all__ = ["COMMANDS"]

TOKEN_ENV = "HOPTRACE_COLLECTOR_TOKEN"


def is_loopback(host: str) -> bool:
    """True when ``host`` binds this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _check_port(host: str, port: int) -> None:
    """Bind ``host:port`` for a moment; one that cannot be bound is a ConfigError."""
    import socket

    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
        family, _, _, _, address = infos[0]
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}); is another collector "
            "running there? Pick another port with --port, or another --host"
        ) from None


def _say_migration(store: SpanStore) -> None:
    """The one line saying a store of an earlier version was migrated on opening."""
    if store.migration:
        click.echo(f"hoptrace collector: {store.migration}", err=True)


@click.command()
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind; loopback unless you mean to expose it.",
)
@click.option(
    "--port", default=4318, show_default=True, type=int, help="Port to listen on (OTLP/HTTP)."
)
@store_option
@click.option(
    "--max-body-bytes",
    type=int,
    default=16 * 1024 * 1024,
    show_default=True,
    help="Largest request body, before and after gzip.",
)
@click.option(
    "--token",
    envvar="HOPTRACE_COLLECTOR_TOKEN",
    help="Require 'Authorization: Bearer TOKEN'; an empty token is an error "
    "[env: HOPTRACE_COLLECTOR_TOKEN].",
)
@click.option(
    "--max-memory",
    envvar="HOPTRACE_MAX_MEMORY",
    default=None,
    metavar="SIZE",
    help="Most memory requests in flight may hold (e.g. 512MiB, 1GiB); past it new "
    "requests get 503 with Retry-After and exporters send again. Default 256MiB "
    "[env: HOPTRACE_MAX_MEMORY].",
)
@click.option(
    "--body-timeout",
    type=float,
    default=10.0,
    show_default=True,
    help="Seconds a request body may take before --min-body-rate applies.",
)
@click.option(
    "--min-body-rate",
    default="32KiB",
    show_default=True,
    metavar="SIZE",
    help="Bytes a second a body must average after --body-timeout; slower: 408.",
)
@click.option(
    "--keep-content",
    is_flag=True,
    default=False,
    envvar="HOPTRACE_KEEP_CONTENT",
    help="Store the prompt and completion attributes GenAI instrumentations record "
    "(dropped at ingest by default) [env: HOPTRACE_KEEP_CONTENT=true].",
)
@click.option(
    "--live-metrics/--no-live-metrics",
    default=True,
    show_default=True,
    envvar="HOPTRACE_LIVE_METRICS",
    help="Attribute traces as they complete and serve GET /metrics (Prometheus) and "
    "GET /live (hoptrace top) [env: HOPTRACE_LIVE_METRICS].",
)
@click.option(
    "--otlp-metrics",
    "otlp_metrics",
    envvar="HOPTRACE_OTLP_METRICS_ENDPOINT",
    metavar="URL",
    help="Also push the live metrics by OTLP/HTTP to URL (e.g. http://127.0.0.1:4318) "
    "[env: HOPTRACE_OTLP_METRICS_ENDPOINT].",
)
@click.option(
    "--live-settle",
    "live_settle",
    type=float,
    default=1.0,
    show_default=True,
    envvar="HOPTRACE_LIVE_SETTLE",
    metavar="SECONDS",
    help="Seconds a trace that looks complete waits for more of its spans before the "
    "live metrics take it; raise it when services export through a Collector that "
    "holds batches longer [env: HOPTRACE_LIVE_SETTLE].",
)
@click.option(
    "--retention",
    envvar="HOPTRACE_RETENTION",
    metavar="DURATION",
    help="Keep spans this long after they arrive (e.g. 7d, 12h); the oldest whole "
    "traces go first. Default: keep everything [env: HOPTRACE_RETENTION].",
)
@click.option(
    "--max-store-size",
    envvar="HOPTRACE_MAX_STORE_SIZE",
    metavar="SIZE",
    help="Keep the store within this size (e.g. 20GiB), dropping the oldest whole "
    "traces; a disk that fills first still gets 503 and Retry-After. Default: no limit "
    "[env: HOPTRACE_MAX_STORE_SIZE].",
)
def collect(
    host: str,
    port: int,
    store: str | None,
    max_body_bytes: int,
    token: str | None,
    max_memory: str | None,
    body_timeout: float,
    min_body_rate: str,
    keep_content: bool,
    live_metrics: bool,
    otlp_metrics: str | None,
    live_settle: float,
    retention: str | None,
    max_store_size: str | None,
) -> None:
    """Run the embedded OTLP/HTTP receiver (POST /v1/traces; POST /v1/logs for the
    events of spans sent as log records) into a span store.

    SIGTERM or Ctrl-C stops it cleanly: every request in flight is answered (committed,
    or refused with 503 so the exporter sends it again) and the store is closed.
    """
    from collector import default_store_path, serve
    from collector.memory import MiB, parse_size, resolve_max_memory
    from collector.pending import DEFAULT_TIMEOUT_S
    from collector.retention import resolve_retention

    if not 0 < port < 65536:
        raise ConfigError(f"--port must be 1..65535, got {port!r}")
    if token is None and os.environ.get(TOKEN_ENV) is not None:
        token = os.environ[TOKEN_ENV]  # click takes an empty variable for an unset one
    if token is not None and not token.strip():
        raise ConfigError(
            f"the collector token is empty (--token or {TOKEN_ENV}), which would turn "
            "authentication off; give a token, or unset it to run without one"
        )
    if token is None and not is_loopback(host):
        click.echo(
            f"hoptrace collector: warning: --host {host} accepts spans from other machines "
            f"and no token is set: anyone who reaches the port can write to the store; set "
            f"--token or {TOKEN_ENV}",
            err=True,
        )
    if max_body_bytes <= 0:
        raise ConfigError(f"--max-body-bytes must be positive, got {max_body_bytes!r}")
    limit = resolve_max_memory(max_memory)
    rate = parse_size(min_body_rate, "--min-body-rate")
    if not body_timeout > 0 or rate <= 0:
        raise ConfigError("--body-timeout and --min-body-rate must be positive")
    if otlp_metrics and not live_metrics:
        raise ConfigError("--otlp-metrics needs the live metrics; drop --no-live-metrics")
    if not 0 <= live_settle < DEFAULT_TIMEOUT_S:
        raise ConfigError(
            f"--live-settle must be at least 0 and under {DEFAULT_TIMEOUT_S:g} seconds (a "
            f"trace not complete by then is taken as it is), got {live_settle!r}"
        )
    if otlp_metrics and not otlp_metrics.startswith(("http://", "https://")):
        raise ConfigError(
            f"--otlp-metrics must be an http:// or https:// URL, got {otlp_metrics!r}"
        )
    from click.core import ParameterSource

    given = click.get_current_context().get_parameter_source
    # From the environment, resolve_retention reads the variable itself and names it.
    keeps = resolve_retention(
        None if given("retention") == ParameterSource.ENVIRONMENT else retention or None,
        None if given("max_store_size") == ParameterSource.ENVIRONMENT else max_store_size or None,
    )
    path = Path(store) if store else default_store_path()
    _check_port(host, port)  # before the banner: a port in use is one line, exit 2
    content = "kept (--keep-content)" if keep_content else "dropped (--keep-content keeps them)"
    auth = (
        "on (Authorization: Bearer token required)"
        if token
        else "off (any client that reaches the port may send spans; --token turns it on)"
    )
    click.echo(
        f"hoptrace collector: OTLP/HTTP on http://{host}:{port}/v1/traces and /v1/logs "
        f"-> {path}\n"
        f"  point exporters at it: OTEL_EXPORTER_OTLP_ENDPOINT=http://{host}:{port}\n"
        f"  authentication: {auth}\n"
        f"  prompt and completion attributes: {content}\n"
        + (
            f"  live metrics: http://{host}:{port}/metrics (hoptrace top --collector "
            f"http://{host}:{port})"
            + (f", pushed by OTLP to {otlp_metrics}" if otlp_metrics else "")
            + "\n"
            if live_metrics
            else "  live metrics: off (--live-metrics turns them on)\n"
        )
        + f"  requests in flight hold at most {limit / MiB:g} MiB (--max-memory); a body "
        f"slower than {rate} bytes/s after {body_timeout:g} s gets 408\n"
        + f"  the store keeps: {keeps.describe()}\n"
        "  Ctrl-C or SIGTERM to stop",
        err=True,
    )
    final = serve(
        path,
        host=host,
        port=port,
        max_body_bytes=max_body_bytes,
        token=token,
        keep_content=keep_content,
        max_memory=limit,
        body_timeout_s=body_timeout,
        min_body_rate=rate,
        live_metrics=live_metrics,
        otlp_metrics_endpoint=otlp_metrics,
        live_settle_s=live_settle,
        retention=keeps,
        on_open=_say_migration,
    )
    click.echo(
        f"hoptrace collector: stopped; {final['spans_stored']} spans stored, "
        f"{final['spans_rejected']} rejected, {final['requests_refused']} requests refused "
        "(503), store closed",
        err=True,
    )


COMMANDS = (collect,)
