"""Run one demo service in this process: ``python -m demo_app.serve_one SERVICE ...``.

Started by :class:`demo_app.chain.Chain`, the service ends when its parent dies, even
by ``kill -9``: on Linux the kernel sends it SIGTERM (``PR_SET_PDEATHSIG``; it fires when
the parent *thread* that started the child ends, which is why the chain starts its
services from the thread that owns it), and a watchdog thread checks the parent's pid
every half second everywhere.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import socket
import sys
import threading
import time

import uvicorn

import tracer
from collector.server import SignalServer
from demo_app.chain import PARENT_PID_ENV
from demo_app.common import setup_logging
from demo_app.profiles import get_profile

_PR_SET_PDEATHSIG = 1


class _Server(SignalServer):
    """A service's server: a stop signal lets the tracer flush its last spans."""

    stop_signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _end_with_parent(parent_pid: int) -> None:
    """SIGTERM this process when ``parent_pid`` is gone."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (OSError, AttributeError):
            pass

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="hoptrace-parent-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, set up tracing, serve until terminated."""
    parser = argparse.ArgumentParser(description="one hoptrace demo service")
    parser.add_argument("service", choices=["gateway", "app", "model"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1", help="bind address (0.0.0.0 in containers)")
    parser.add_argument(
        "--fd",
        type=int,
        default=None,
        help="serve on this listening socket, inherited from the parent, instead of binding",
    )
    parser.add_argument("--upstream", help="base URL of the next service")
    parser.add_argument("--profile", default="wan")
    parser.add_argument("--speedup", type=float, default=1.0)
    parser.add_argument("--failure-rate", type=float, default=0.0)
    parser.add_argument("--api-key", action="append", default=[])
    parser.add_argument("--rate-limit", type=float, default=0.0)
    parser.add_argument("--tokens-per-minute", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--max-concurrency", type=int, default=0)
    parser.add_argument(
        "--heartbeat", type=float, default=5.0, help="seconds between SSE keep-alive comments"
    )
    parser.add_argument("--otlp-endpoint", default=None)
    args = parser.parse_args(argv)

    profile = get_profile(args.profile)
    parent = os.environ.get(PARENT_PID_ENV, "")
    if parent.isdigit():
        _end_with_parent(int(parent))
    setup_logging(args.service)
    tracer.setup(
        service_name=os.environ.get("OTEL_SERVICE_NAME") or args.service,
        endpoint=args.otlp_endpoint,
    )
    if args.service == "model":
        from demo_app.model import create_model_app

        app = create_model_app(profile, args.speedup, args.failure_rate)
    elif args.service == "app":
        from demo_app.app import create_app_app

        app = create_app_app(profile, args.upstream, timeout_s=args.timeout)
    else:
        from demo_app.gateway import GatewayConfig, create_gateway_app

        config = GatewayConfig(
            api_keys=args.api_key or [os.environ.get("HOPTRACE_API_KEY", "hoptrace-demo-key")],
            rate_limit_rps=args.rate_limit,
            tokens_per_minute=args.tokens_per_minute,
            upstream_timeout_s=args.timeout,
            max_concurrency=args.max_concurrency,
            heartbeat_s=args.heartbeat,
        )
        app = create_gateway_app(profile, args.upstream, config)
    server_config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=3,
    )
    # The chain binds the port itself and passes the socket down (demo_app/chain.py).
    sockets = None if args.fd is None else [socket.socket(fileno=args.fd)]
    try:
        _Server(server_config).run(sockets=sockets)
    finally:
        tracer.shutdown()  # the last batch of spans leaves before the process ends


if __name__ == "__main__":
    main()
