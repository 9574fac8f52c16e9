"""Run the receiver: in the foreground (``hoptrace collect``) or in a background thread.

Stopping (SIGTERM or SIGINT in the foreground, :meth:`BackgroundCollector.stop`) is
clean: the port closes, new requests get 503 with ``Retry-After``, what is queued is
committed for a few seconds and the rest refused, every request is answered, and
the store is closed (its WAL checkpointed) before :func:`serve` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import uvicorn

from collector.pending import DEFAULT_SETTLE_S
from collector.receiver import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MIN_BODY_RATE,
    DRAIN_S,
    OtlpReceiver,
)
from collector.retention import Retention
from collector.store import SpanStore
from tracer._errors import ReceiverError

__all__ = ["BackgroundCollector", "SignalServer", "free_port", "listening", "serve"]

#: Seconds the server waits for requests in flight after a stop before cancelling them.
_GRACE_S = DRAIN_S + 2


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def listening(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (0: a free port) and listening, as uvicorn binds
    its own (``SO_REUSEADDR``, its backlog), to hand to a server: nothing can take the
    port between the pick and the bind.

    Raises:
        OSError: the port is taken, or ``host`` is not this machine's.
    """
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock


class SignalServer(uvicorn.Server):
    """uvicorn's server without re-raising the stop signal once it has shut down.

    uvicorn re-raises the signal it caught after its shutdown, which ends the process
    before what runs after ``run()`` (closing the store, flushing the last spans)
    gets to run; here a signal in ``stop_signals`` only starts the shutdown.
    """

    stop_signals: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in self.stop_signals}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


class _Server(SignalServer):
    """The collector's server, telling the receiver when a stop begins."""

    def __init__(self, app: OtlpReceiver, host: str, port: int):
        super().__init__(
            uvicorn.Config(
                app,
                host=host,
                port=port,
                log_level="warning",
                access_log=False,
                lifespan="on",
                timeout_graceful_shutdown=int(_GRACE_S),
            )
        )
        self.receiver = app

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.receiver.begin_shutdown()
        super().handle_exit(sig, frame)

    def stop(self) -> None:
        """Begin a graceful stop (from any thread)."""
        self.receiver.begin_shutdown()
        self.should_exit = True


def serve(
    store_path: str | Path,
    *,
    host: str = "127.0.0.1",
    port: int = 4318,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    token: str | None = None,
    keep_content: bool = False,
    max_memory: int | str | None = None,
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
    min_body_rate: int = DEFAULT_MIN_BODY_RATE,
    live_metrics: bool | None = None,
    otlp_metrics_endpoint: str | None = None,
    live_settle_s: float = DEFAULT_SETTLE_S,
    retention: Retention | None = None,
    on_open: Callable[[SpanStore], None] | None = None,
) -> dict[str, object]:
    """Receive OTLP/HTTP on ``host:port`` into the store until SIGTERM or SIGINT.

    Prompt and completion attributes are dropped before spans are stored unless
    ``keep_content`` is true; ``max_memory`` bounds what requests in flight hold,
    ``body_timeout_s`` and ``min_body_rate`` how slowly a body may come (see
    :class:`OtlpReceiver`), ``live_metrics`` turns on ``GET /metrics`` (and
    ``otlp_metrics_endpoint`` their OTLP push, ``live_settle_s`` how long a trace that
    looks complete waits for more spans; :mod:`collector.live`), ``retention``
    what the store keeps (:mod:`collector.retention`). ``on_open`` is given the store
    once it is open (and migrated, if it was made by an earlier version). Returns the
    receiver's final counts (its /healthz).

    Raises:
        ReceiverError: the port could not be bound.
        ValueError: a bad ``max_body_bytes`` or ``max_memory``.
    """
    store = SpanStore(store_path, create=True, retention=retention)
    try:
        if on_open is not None:
            on_open(store)
        app = OtlpReceiver(
            store,
            max_body_bytes=max_body_bytes,
            token=token,
            keep_content=keep_content,
            max_memory=max_memory,
            body_timeout_s=body_timeout_s,
            min_body_rate=min_body_rate,
            live_metrics=live_metrics,
            otlp_metrics_endpoint=otlp_metrics_endpoint,
            live_settle_s=live_settle_s,
        )
    except BaseException:
        store.close()
        raise
    server = _Server(app, host, port)
    try:
        server.run()
    except SystemExit:  # uvicorn's exit when it cannot bind: said in one line below
        if server.started:
            raise
    finally:
        app.close()
        final = app.health()  # the store's part is read before it is closed
        store.close()
    if not server.started:
        raise ReceiverError(
            f"could not listen on {host}:{port}; is another collector running, or is "
            f"{host} not an address of this machine? Pick another port with --port or "
            "another --host"
        )
    return final


class BackgroundCollector:
    """The receiver in a thread of this process, for the demo and for tests.

    Usage::

        with BackgroundCollector(store_path) as collector:
            tracer.setup(endpoint=collector.endpoint)

    ``keep_content=True`` stores prompt and completion attributes too; by default they
    are dropped. ``max_memory`` bounds what requests in flight hold (see
    :class:`OtlpReceiver`); ``live_metrics`` serves ``GET /metrics`` (see
    :mod:`collector.live`); ``retention`` bounds the store (:mod:`collector.retention`).
    """

    def __init__(
        self,
        store_path: str | Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        token: str | None = None,
        keep_content: bool = False,
        max_memory: int | str | None = None,
        body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
        min_body_rate: int = DEFAULT_MIN_BODY_RATE,
        live_metrics: bool | None = None,
        otlp_metrics_endpoint: str | None = None,
        live_settle_s: float = DEFAULT_SETTLE_S,
        retention: Retention | None = None,
    ):
        self.host = host
        self.port = port or free_port(host)
        self._own_port = not port
        self.store = SpanStore(store_path, create=True, retention=retention)
        try:
            self.app = OtlpReceiver(
                self.store,
                max_body_bytes=max_body_bytes,
                token=token,
                keep_content=keep_content,
                max_memory=max_memory,
                body_timeout_s=body_timeout_s,
                min_body_rate=min_body_rate,
                live_metrics=live_metrics,
                otlp_metrics_endpoint=otlp_metrics_endpoint,
                live_settle_s=live_settle_s,
            )
        except BaseException:
            self.store.close()
            raise
        self._server = _Server(self.app, host, self.port)
        self._thread: threading.Thread | None = None

    def _listen(self) -> socket.socket:
        """The listening socket (:func:`listening`), bound before the server's thread
        starts: on the port asked for, or on the one this collector picked (another,
        when something took it since: an outgoing connection's source port, a server
        picked the same way).

        Raises:
            ReceiverError: the port asked for is taken, or the host is not this
                machine's.
        """
        error = OSError(errno.EADDRNOTAVAIL, "no port to try")
        for port in (self.port, 0) if self._own_port else (self.port,):
            try:
                sock = listening(self.host, port)
            except OSError as exc:
                error = exc
                continue
            self.port = int(sock.getsockname()[1])
            return sock
        if error.errno == errno.EADDRINUSE:
            raise ReceiverError(
                f"port {self.port} is in use; stop what listens there or choose another port"
            )
        raise ReceiverError(f"cannot listen on {self.host}:{self.port}: {error.strerror}")

    @property
    def endpoint(self) -> str:
        """The OTLP/HTTP base URL, e.g. ``http://127.0.0.1:4318``."""
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 10.0) -> BackgroundCollector:
        """Start serving; returns when the port accepts connections.

        Raises:
            ReceiverError: the port asked for is taken, or the server did not start.
        """
        sock = self._listen()
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._server.serve(sockets=[sock])),
            name="hoptrace-collector",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise ReceiverError(f"the collector did not start on {self.host}:{self.port}")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving: answer or refuse what is queued, commit, close the store."""
        self._server.stop()
        if self._thread is not None:
            self._thread.join(timeout=_GRACE_S + 10)
        self.app.close()
        self.store.close()

    def __enter__(self) -> BackgroundCollector:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
