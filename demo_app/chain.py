"""Start the whole demo chain: the embedded collector and the three services.

    with Chain(store_path, profile="wan") as chain:
        print(chain.base_url)     # http://127.0.0.1:PORT/v1 (the gateway)

Services run as child processes on free loopback ports, each serving on a socket this
process bound and handed down (so no other server can answer in a service's place);
they are stopped on exit,
on an exception and on Ctrl-C (and, through :func:`stop_on_signals`, on SIGTERM and
SIGHUP), and each child also ends by itself when this process dies without a chance
to clean up (``kill -9``): it asks the kernel for a signal on its parent's death and
watches its parent's pid. No process is left behind holding a port.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from collector import BackgroundCollector, free_port, listening
from tracer._errors import HoptraceError, ReceiverError

__all__ = ["DEMO_KEY", "PARENT_PID_ENV", "Chain", "port_in_use", "stop_on_signals"]

#: The environment variable that tells a service process whose death to outlive not.
PARENT_PID_ENV = "HOPTRACE_PARENT_PID"


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True when something already listens on ``host:port`` (connections of a closed
    server lingering in TIME_WAIT do not count: servers bind with SO_REUSEADDR)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def _listen(port: int, host: str = "127.0.0.1") -> socket.socket | None:
    """A socket listening on ``host:port`` (0: a free port), or None when it is taken."""
    try:
        return listening(host, port)
    except OSError:
        return None


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into a clean exit (``SystemExit``) while the block runs,
    so a ``with Chain(...)`` inside it stops every service, as Ctrl-C does."""

    def leave(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    wanted = [signal.SIGTERM, signal.SIGHUP]
    previous = {sig: signal.signal(sig, leave) for sig in wanted}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


DEMO_KEY = "hoptrace-demo-key"


class Chain:
    """The collector (in this process) and gateway, app and model (child processes)."""

    def __init__(
        self,
        store_path: str | Path,
        *,
        profile: str = "wan",
        speedup: float = 1.0,
        api_key: str = DEMO_KEY,
        rate_limit: float = 0.0,
        tokens_per_minute: int = 0,
        timeout_s: float = 30.0,
        gateway_timeout_s: float | None = None,
        heartbeat_s: float = 5.0,
        failure_rate: float = 0.0,
        max_concurrency: int = 0,
        otlp_port: int = 0,
        upstream: str | None = None,
        log_dir: str | Path | None = None,
        traced: bool = True,
        otlp_endpoint: str | None = None,
        protocol: str = "http/json",
        env: dict[str, str] | None = None,
        live_metrics: bool = False,
    ):
        self.collector = BackgroundCollector(store_path, port=otlp_port, live_metrics=live_metrics)
        self.profile = profile
        self.api_key = api_key
        self.ports = {name: free_port() for name in ("gateway", "app", "model")}
        self._procs: list[subprocess.Popen[bytes]] = []
        self._names: list[str] = []
        self._logs: list[Any] = []
        self.log_dir = Path(log_dir) if log_dir else None
        self.traced = traced
        self.protocol = protocol
        self._extra_env = dict(env or {})
        #: Where the services export spans: the embedded collector unless given.
        self.otlp_endpoint = otlp_endpoint
        self._speedup = speedup
        self._options = dict(
            rate_limit=rate_limit,
            tokens_per_minute=tokens_per_minute,
            timeout_s=timeout_s,
            gateway_timeout_s=gateway_timeout_s or timeout_s,
            heartbeat_s=heartbeat_s,
            failure_rate=failure_rate,
            max_concurrency=max_concurrency,
        )
        self.model_url = upstream or f"http://127.0.0.1:{self.ports['model']}/v1"
        #: The ports picked here (a caller may set its own): another process may take
        #: one of them before start() binds it; those are picked again there.
        self._picked = dict(self.ports)

    def use_port(self, service: str, port: int) -> None:
        """Run ``service`` on ``port`` (the caller's choice: start() fails with one line
        if it is taken, rather than picking another)."""
        self.ports[service] = port
        self._picked.pop(service, None)

    @property
    def service_pids(self) -> dict[str, int]:
        """The process id of each running service."""
        return {name: proc.pid for name, proc in zip(self._names, self._procs, strict=True)}

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL of the gateway."""
        return f"http://127.0.0.1:{self.ports['gateway']}/v1"

    def _spawn(self, service: str, listening: dict[str, socket.socket], *extra: str) -> None:
        fd = listening[service].fileno()
        cmd = [
            sys.executable,
            "-m",
            "demo_app.serve_one",
            service,
            "--port",
            str(self.ports[service]),
            "--fd",
            str(fd),
            "--profile",
            self.profile,
            "--otlp-endpoint",
            self.otlp_endpoint or self.collector.endpoint,
            *extra,
        ]
        out: Any = subprocess.DEVNULL
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            out = open(self.log_dir / f"{service}.log", "ab")  # noqa: SIM115
            self._logs.append(out)
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP")}
        env[PARENT_PID_ENV] = str(os.getpid())
        if not self.traced:  # the same services with the OpenTelemetry SDK switched off
            env["OTEL_SDK_DISABLED"] = "true"
        # OTLP JSON costs the services' export threads a fifth of the protobuf encoder's
        # CPU (docs/overhead.md); the embedded collector and the Collector take both.
        env["OTEL_EXPORTER_OTLP_PROTOCOL"] = self.protocol
        env.update(self._extra_env)
        self._procs.append(subprocess.Popen(cmd, stdout=out, stderr=out, env=env, pass_fds=(fd,)))
        self._names.append(service)

    def _services(self) -> list[str]:
        """The services this chain starts (no model in front of an upstream server)."""
        own_model = self.model_url.startswith(f"http://127.0.0.1:{self.ports['model']}")
        return [name for name in ("model", "app", "gateway") if name != "model" or own_model]

    def start(self, timeout_s: float = 30.0) -> Chain:
        """Start everything; returns when every service answers.

        Raises:
            HoptraceError: a port is taken ("gateway: port 8000 is in use"), or a
                service exited or did not answer in time (named, with its port).
        """
        # Each service's listening socket is bound here and handed to its process, so
        # nothing can take the port between the pick and the bind (another process, an
        # outgoing connection's source port, or the collector, whose port is picked by
        # the same kernel call and could come out the same): a foreign server on the
        # port would answer the readiness probe in the service's place.
        listening: dict[str, socket.socket] = {}
        try:
            for name in self._services():
                port = self.ports[name]
                sock = _listen(port)
                if sock is None and port == self._picked.get(name):
                    sock = _listen(0)  # picked free, taken since: pick another
                if sock is None:
                    raise HoptraceError(
                        f"{name}: port {port} is in use; stop what listens there or choose "
                        "another port"
                    )
                listening[name] = sock
                if sock.getsockname()[1] != port:
                    self.ports[name] = self._picked[name] = sock.getsockname()[1]
                    if name == "model" and self.model_url == f"http://127.0.0.1:{port}/v1":
                        self.model_url = f"http://127.0.0.1:{self.ports['model']}/v1"
            try:  # the collector binds its own port the same way, clear of the above
                self.collector.start()
            except ReceiverError as exc:
                raise HoptraceError(f"collector: {exc}") from None
        except BaseException:
            for sock in listening.values():
                sock.close()
            raise
        try:
            o = self._options
            if "model" in listening:
                self._spawn(
                    "model",
                    listening,
                    "--speedup",
                    str(self._speedup),
                    "--failure-rate",
                    str(o["failure_rate"]),
                )
            self._spawn(
                "app", listening, "--upstream", self.model_url, "--timeout", str(o["timeout_s"])
            )
            self._spawn(
                "gateway",
                listening,
                "--upstream",
                f"http://127.0.0.1:{self.ports['app']}",
                "--api-key",
                self.api_key,
                "--rate-limit",
                str(o["rate_limit"]),
                "--tokens-per-minute",
                str(o["tokens_per_minute"]),
                "--timeout",
                str(o["gateway_timeout_s"]),
                "--heartbeat",
                str(o["heartbeat_s"]),
                "--max-concurrency",
                str(o["max_concurrency"]),
            )
            deadline = time.monotonic() + timeout_s
            for name in self._services():
                self._wait(name, self.ports[name], deadline)
        except BaseException:
            self.stop()
            raise
        finally:
            for sock in listening.values():  # the services hold their own copies
                sock.close()
        return self

    def _wait(self, name: str, port: int, deadline: float) -> None:
        while True:
            for service, proc in zip(self._names, self._procs, strict=True):
                if proc.poll() is not None:
                    where = self.ports[service]
                    busy = " (is the port in use?)" if port_in_use(where) else ""
                    raise HoptraceError(
                        f"{service}: the demo service on port {where} exited with "
                        f"{proc.returncode}{busy}"
                    )
            try:
                httpx.get(f"http://127.0.0.1:{port}/docs", timeout=1.0)
                return
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise HoptraceError(
                        f"the demo {name} service did not start on port {port}"
                    ) from None
                time.sleep(0.05)

    def configure_model(self, **settings: float) -> None:
        """Change the simulated model (speedup, failure_rate, midstream_failure_rate)."""
        resp = httpx.post(f"http://127.0.0.1:{self.ports['model']}/admin/config", json=settings)
        resp.raise_for_status()

    def stop(self) -> None:
        """Stop the services, then the collector (after it committed what it got)."""
        for proc in self._procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self._procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs.clear()
        self._names.clear()
        for fh in self._logs:
            fh.close()
        self.collector.stop()

    def __enter__(self) -> Chain:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
