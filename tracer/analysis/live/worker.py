"""The attribution process:
``python -m tracer.analysis.live.worker DATA_FD CONTROL_FD SETTINGS``.

:class:`collector.live.LiveMetrics` starts it by module path (the collector imports
nothing of the analyzer). It reads batches of committed rows (pickled lists) from
``DATA_FD``, attributes the traces as they become ready
(:class:`~tracer.analysis.live.attribution.LiveAttribution`), and answers the requests
that come on ``CONTROL_FD``: ``metrics`` (the Prometheus text) and ``live`` (the window summary
of ``hoptrace top``). It ends when the data pipe closes (the collector stopped or died).
"""

from __future__ import annotations

import logging
import os
import pickle
import sys
import time
from multiprocessing.connection import Connection, wait
from typing import Any

from collector.metrics import PrometheusInstruments
from collector.window import Window
from tracer.analysis.live.attribution import LiveAttribution, Sink

_logger = logging.getLogger("collector.live")
#: Seconds between looks at the pending traces.
TICK_S = 0.25


class _Worker:
    def __init__(self, settings: dict[str, Any]):
        import prometheus_client

        prometheus_client.disable_created_metrics()  # the *_created series: noise here
        self.prometheus = PrometheusInstruments()
        self.window = Window()
        sinks: list[Sink] = [self.prometheus, self.window]
        self.otlp = None
        if settings.get("otlp_endpoint"):
            from collector.otlp_metrics import OtlpInstruments

            self.otlp = OtlpInstruments(
                settings["otlp_endpoint"], settings.get("otlp_interval_s", 10.0)
            )
            sinks.append(self.otlp)
        self.live = LiveAttribution(
            sinks,
            settle_s=settings["settle_s"],
            timeout_s=settings["timeout_s"],
            max_spans=settings["max_pending_spans"],
        )

    def tick(self) -> None:
        self.live.tick(time.monotonic())

    def answer(self, kind: str, arg: Any) -> Any:
        self.tick()
        if kind == "metrics":
            counts = self.live.counts()
            self.prometheus.pending_traces.set(counts.pop("pending_traces"))
            self.prometheus.pending_spans.set(counts.pop("pending_spans"))
            self.prometheus.set_counts({**counts, **arg})
            return self.prometheus.render()
        if kind == "live":
            by, window_s = arg
            try:
                return self.window.summary(by, window_s)
            except ValueError as bad:
                return str(bad)
        return f"unknown request {kind!r}"

    def close(self) -> None:
        if self.otlp is not None:
            self.otlp.close()


def run(data: Connection, control: Connection, settings: dict[str, Any]) -> None:
    """Serve until ``data`` closes."""
    worker = _Worker(settings)
    control.send_bytes(pickle.dumps((0, "ready")))  # everything imported: ingest may start
    last = time.monotonic()
    try:
        while True:
            for conn in wait([data, control], timeout=TICK_S):
                try:
                    message = conn.recv_bytes()  # type: ignore[union-attr]
                except (EOFError, OSError):
                    return
                if conn is data:
                    worker.live.add_rows(pickle.loads(message), time.monotonic())
                else:
                    seq, kind, arg = pickle.loads(message)
                    control.send_bytes(pickle.dumps((seq, worker.answer(kind, arg))))
            if time.monotonic() - last >= TICK_S:
                worker.tick()
                last = time.monotonic()
    finally:
        worker.close()


def main(argv: list[str]) -> None:
    import orjson

    data_fd, control_fd, settings = int(argv[0]), int(argv[1]), orjson.loads(argv[2])
    # Ingest comes first when the machine is busy: attribution takes the CPU left over
    # (and when it falls behind, the feed's bound in the receiver applies).
    try:
        os.nice(settings.get("nice", 10))
    except OSError:
        pass
    logging.basicConfig(level=logging.WARNING, format="hoptrace live metrics: %(message)s")
    run(Connection(data_fd, writable=False), Connection(control_fd), settings)


if __name__ == "__main__":
    main(sys.argv[1:])
