"""Run one demo service in this process: ``python -m demo_app.serve_one SERVICE ...``."""

from __future__ import annotations

import argparse
import os

import uvicorn

import tracer
from demo_app.common import setup_logging
from demo_app.profiles import get_profile


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, set up tracing, serve until terminated."""
    parser = argparse.ArgumentParser(description="one hoptrace demo service")
    parser.add_argument("service", choices=["gateway", "app", "model"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1", help="bind address (0.0.0.0 in containers)")
    parser.add_argument("--upstream", help="base URL of the next service")
    parser.add_argument("--profile", default="seed")
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
    try:
        uvicorn.run(
            app,
            host=args.host,
            port=args.port,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=3,
        )
    finally:
        tracer.shutdown()


if __name__ == "__main__":
    main()
