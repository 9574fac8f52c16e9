"""A batch span processor for the JSON exporter that keeps the garbage collector idle.

The SDK's ``BatchSpanProcessor`` queues each ended span as a ``ReadableSpan``: an object
graph of about ten containers (the span, its ``BoundedAttributes`` and their dict, its
events, contexts) that waits up to ``OTEL_BSP_SCHEDULE_DELAY`` or a full batch in the
queue. That is long enough for the garbage collector to move it into its oldest
generation, and what is moved there triggers full collections, which walk every object
of the service (35-60 ms of CPU each in the demo services; docs/overhead.md): traced,
the demo chain's collections took 0.37 ms of CPU per request more than untraced.

This processor queues a *snapshot* instead: one flat tuple of ints and strings (the
resource by a small key). A tuple that holds only such values is untracked by the
collector at its first pass, so a queued span costs the collections nothing. The
exporter's thread encodes the snapshots (:func:`tracer.sdk.json_export.encode_snapshots`)
with less work than a ``ReadableSpan`` needs.

It honours the ``OTEL_BSP_*`` variables as the SDK's processor does (keywords win):
``OTEL_BSP_SCHEDULE_DELAY`` (5000 ms), ``OTEL_BSP_MAX_QUEUE_SIZE`` (2048),
``OTEL_BSP_MAX_EXPORT_BATCH_SIZE`` (512), ``OTEL_BSP_EXPORT_TIMEOUT`` (30000 ms, the
longest :meth:`~SnapshotBatchProcessor.shutdown` waits for the last export). Like the
SDK it never raises into the application: a span it cannot queue (the queue is full,
the export failed, the span could not be read) is dropped, counted
(:attr:`SnapshotBatchProcessor.drops`) and said once at WARNING; the next batch that
is sent carries the count on its resource (:data:`tracer.attributes.SPANS_DROPPED`),
and ``hoptrace collect`` adds it up in its ``/healthz``.

Reading a span's fields instead of its properties depends on how the SDK keeps them,
which is no part of its API. So the processor checks, once when it is made, that the
fields give the same snapshot as the properties on a span that the SDK made; if they
do not (a field renamed or gone in another SDK release), it reads every span through
its properties, which costs more CPU per span, and says so once at WARNING.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from opentelemetry.context import (
    _SUPPRESS_INSTRUMENTATION_KEY,
    Context,
    attach,
    detach,
    set_value,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import (
    ReadableSpan,
    Span,
    SpanProcessor,
    SynchronousMultiSpanProcessor,
)
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import TraceFlags

from tracer.attributes import SPANS_DROPPED
from tracer.sdk.snapshot import (
    RESOURCE_KEY,
    Snapshot,
    fast_snapshot,
    fast_span_type,
    public_snapshot,
    snapshot,
)

__all__ = [
    "RoutingSpanProcessor",
    "Snapshot",
    "SnapshotBatchProcessor",
    "SnapshotExporter",
    "SpanDrops",
    "snapshot",
]

_logger = logging.getLogger(__name__)
_SAMPLED = TraceFlags.SAMPLED


class SnapshotExporter(Protocol):
    """What the processor sends batches to (``tracer.sdk.json_export.JsonSpanExporter``)."""

    def export_snapshots(self, items: Sequence[Snapshot], resources: Mapping[int, Any]) -> Any:
        """Send one batch; ``resources`` maps each snapshot's resource key to its
        resource."""

    def shutdown(self) -> None:
        """Stop sending."""


_DEFAULTS = {
    "OTEL_BSP_SCHEDULE_DELAY": 5000,
    "OTEL_BSP_MAX_QUEUE_SIZE": 2048,
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": 512,
    "OTEL_BSP_EXPORT_TIMEOUT": 30_000,
}


def _env_int(name: str) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return _DEFAULTS[name]
    try:
        return int(raw)
    except ValueError:
        _logger.warning("%s must be an integer, got %r; using %s", name, raw, _DEFAULTS[name])
        return _DEFAULTS[name]


@dataclass(frozen=True, slots=True)
class SpanDrops:
    """Spans a :class:`SnapshotBatchProcessor` dropped since it was made, by cause.

    Attributes:
        queue_full: ended while the queue held ``max_queue_size`` spans.
        export_failed: in a batch the exporter failed to send (it returned
            ``FAILURE`` or raised), or still queued when shutdown's timeout ran out.
        snapshot_failed: could not be read when they ended.
    """

    queue_full: int = 0
    export_failed: int = 0
    snapshot_failed: int = 0

    @property
    def total(self) -> int:
        """Every span dropped."""
        return self.queue_full + self.export_failed + self.snapshot_failed


class SnapshotBatchProcessor(SpanProcessor):
    """Queue snapshots of ended, sampled spans; export them in batches on one thread.

    Args:
        exporter: the JSON exporter that sends the batches.
        schedule_delay_millis: the longest a span waits before its batch is sent.
        max_queue_size: spans held at most; more are dropped.
        max_export_batch_size: spans per export; a full batch is sent at once.
        export_timeout_millis: the longest :meth:`shutdown` waits for the last
            batches to be sent; what is still queued then is dropped.

    Raises:
        ValueError: a size, delay or timeout that is not positive, or a batch larger
            than the queue.
    """

    def __init__(
        self,
        exporter: SnapshotExporter,
        *,
        schedule_delay_millis: int | None = None,
        max_queue_size: int | None = None,
        max_export_batch_size: int | None = None,
        export_timeout_millis: int | None = None,
    ):
        delay = _env_int("OTEL_BSP_SCHEDULE_DELAY") if schedule_delay_millis is None else (
            schedule_delay_millis
        )  # fmt: skip
        queue = _env_int("OTEL_BSP_MAX_QUEUE_SIZE") if max_queue_size is None else max_queue_size
        batch = (
            _env_int("OTEL_BSP_MAX_EXPORT_BATCH_SIZE")
            if max_export_batch_size is None
            else max_export_batch_size
        )
        timeout = (
            _env_int("OTEL_BSP_EXPORT_TIMEOUT")
            if export_timeout_millis is None
            else export_timeout_millis
        )
        if delay <= 0:
            raise ValueError(f"schedule_delay_millis must be positive, got {delay!r}")
        if queue <= 0 or batch <= 0:
            raise ValueError(f"queue and batch sizes must be positive, got {queue!r}, {batch!r}")
        if batch > queue:
            raise ValueError(
                f"max_export_batch_size must be at most max_queue_size, got {batch!r} > {queue!r}"
            )
        if timeout <= 0:
            raise ValueError(f"export_timeout_millis must be positive, got {timeout!r}")
        self._exporter = exporter
        self._delay_s = delay / 1000
        self._max_queue = queue
        self._max_batch = batch
        self._export_timeout_millis = timeout
        self._resources: dict[int, Any] = {}
        self._shutdown = False
        # Spans of this class are read from their fields; any other through properties.
        self._fast = fast_span_type()
        self._dropped = {"queue_full": 0, "export_failed": 0, "snapshot_failed": 0}
        self._warned: set[str] = set()
        self._start()
        if hasattr(os, "register_at_fork"):
            ref = weakref.WeakMethod(self._start)

            def after_in_child() -> None:
                start = ref()
                if start is not None:
                    start()

            os.register_at_fork(after_in_child=after_in_child)

    def _start(self) -> None:
        """(Re)create the queue, the locks and the worker thread (also after a fork)."""
        self._queue: collections.deque[Snapshot] = collections.deque()
        self._wake = threading.Event()
        self._export_lock = threading.Lock()
        self._count_lock = threading.Lock()
        # Drops no batch has carried yet (a forked child reports only its own).
        self._unreported = 0
        self._abandoned = False
        self._worker = threading.Thread(target=self._work, name="hoptrace-span-export", daemon=True)
        self._worker.start()

    @property
    def span_exporter(self) -> SnapshotExporter:
        """The exporter the batches go to."""
        return self._exporter

    @property
    def drops(self) -> SpanDrops:
        """The spans dropped so far, by cause."""
        with self._count_lock:
            return SpanDrops(**self._dropped)

    @property
    def reads_fields(self) -> bool:
        """True when spans are read from the SDK's fields (the check at construction
        passed), False when through their properties."""
        return self._fast is not None

    def _drop(self, cause: str, count: int) -> bool:
        """Count ``count`` spans dropped for ``cause``; True the first time."""
        with self._count_lock:
            self._dropped[cause] += count
            self._unreported += count
            first = cause not in self._warned
            self._warned.add(cause)
        return first

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Nothing to do when a span starts."""

    def on_end(self, span: ReadableSpan) -> None:
        """Queue a snapshot of a sampled span; never raises."""
        if self._shutdown:
            return
        try:
            fast = type(span) is self._fast  # fields instead of properties, as snapshot
            if fast:
                # The flags are a SpanContext's fourth field (it is a tuple).
                ctx: Any = span._context
                sampled = ctx[3] & _SAMPLED
            else:
                sampled = span.context.trace_flags & _SAMPLED
            if not sampled:
                return
            resource = span._resource if fast else span.resource
            key = id(resource)
            if key not in self._resources:
                self._resources[key] = resource  # held, so the id stays its own
            item = fast_snapshot(span, key) if fast else public_snapshot(span, key)
        except Exception:  # noqa: BLE001 - telemetry never breaks the app
            if self._drop("snapshot_failed", 1):
                _logger.warning(
                    "hoptrace: a span could not be read and was dropped (later ones are "
                    "counted in the processor's drops)",
                    exc_info=True,
                )
            return
        queue = self._queue
        if len(queue) >= self._max_queue:
            if self._drop("queue_full", 1):
                _logger.warning(
                    "hoptrace: the span queue is full (%d spans); dropping spans (they are "
                    "counted in the processor's drops)",
                    self._max_queue,
                )
            return
        queue.append(item)
        if len(queue) >= self._max_batch and not self._wake.is_set():
            self._wake.set()

    def _work(self) -> None:
        while not self._shutdown:
            self._wake.wait(self._delay_s)
            self._wake.clear()
            if self._shutdown:
                break
            self._export(everything=False)
        self._export(everything=True)

    def _export(self, *, everything: bool) -> None:
        """Send one batch, and more while a full batch waits (or, ``everything``, until
        the queue is empty)."""
        with self._export_lock:
            first = True
            queue = self._queue
            while (
                queue
                and not self._abandoned  # shutdown timed out: it counts what is left
                and (first or everything or len(queue) >= self._max_batch)
            ):
                first = False
                batch = _take(queue, self._max_batch)
                if batch:
                    self._send(batch)

    def _send(self, batch: list[Snapshot]) -> None:
        """Export one batch, with the drops not reported yet on its first resource."""
        reported = self._unreported
        error: Exception | None = None
        token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
        try:
            resources: Mapping[int, Any] = self._resources
            if reported:
                key = batch[0][RESOURCE_KEY]
                resources = {**resources, key: _with_drops(resources[key], reported)}
            result = self._exporter.export_snapshots(batch, resources)
            failed = result is SpanExportResult.FAILURE
        except Exception as exc:  # noqa: BLE001 - telemetry never breaks the app
            failed, error = True, exc
        finally:
            detach(token)
        if not failed:
            with self._count_lock:
                self._unreported -= reported
        elif self._drop("export_failed", len(batch)):
            _logger.warning(
                "hoptrace: exporting %d spans failed; they are dropped (later failures are "
                "counted in the processor's drops)",
                len(batch),
                exc_info=error,
            )
        elif error is not None:
            _logger.debug("hoptrace: the span exporter raised", exc_info=error)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export every queued span now; False after shutdown."""
        if self._shutdown:
            return False
        self._export(everything=True)
        return True

    def shutdown(self, timeout_millis: int | None = None) -> None:
        """Export what is queued, stop the thread and shut the exporter down.

        Waits at most ``timeout_millis`` (else ``export_timeout_millis``) for the last
        batches; the spans still queued then are dropped and counted.
        """
        if self._shutdown:
            return
        self._shutdown = True
        self._wake.set()
        timeout = self._export_timeout_millis if timeout_millis is None else timeout_millis
        self._worker.join(max(timeout, 0) / 1000)
        if self._worker.is_alive():
            self._abandoned = True
            left = len(_take(self._queue, len(self._queue)))
            self._drop("export_failed", left)
            _logger.warning(
                "hoptrace: the last spans were not sent within %d ms of shutdown; %d queued "
                "spans are dropped",
                timeout,
                left,
            )
        self._exporter.shutdown()


def _take(queue: collections.deque[Snapshot], count: int) -> list[Snapshot]:
    """Up to ``count`` snapshots from the front of ``queue``; each is taken once, also
    while another thread takes from it."""
    out: list[Snapshot] = []
    for _ in range(count):
        try:
            out.append(queue.popleft())
        except IndexError:
            break
    return out


def _with_drops(resource: Any, count: int) -> Any:
    """``resource`` with :data:`~tracer.attributes.SPANS_DROPPED` set to ``count``."""
    return resource.merge(Resource({SPANS_DROPPED: count}))


def _start_nothing(span: Span, parent_context: Context | None = None) -> None:
    """A snapshot processor does nothing when a span starts."""


def _end_nothing(span: Span) -> None:
    """Nor when it is about to end."""


class RoutingSpanProcessor(SynchronousMultiSpanProcessor):
    """The provider's list of span processors (``TracerProvider(active_span_processor=)``)
    that hands spans straight to a lone :class:`SnapshotBatchProcessor`.

    The SDK's list calls each processor in a loop, three times a span (start, ending,
    end): about 3,900 of the 110,000 instructions a span costs (callgrind,
    docs/overhead.md). While the snapshot processor is the only one, this list's
    ``on_end`` is that processor's and its ``on_start`` and ``_on_ending`` do nothing, as
    the processor's own do; once another processor is added (``capture_spans``, a
    user's), it calls every processor in order, as the SDK's does.
    """

    def __init__(self) -> None:
        super().__init__()
        self._added: list[SpanProcessor] = []
        self._adding = threading.Lock()

    def add_span_processor(self, span_processor: SpanProcessor) -> None:
        """Add a processor; spans reach it from the next one on."""
        with self._adding:
            super().add_span_processor(span_processor)
            self._added.append(span_processor)
            only = self._added[0] if len(self._added) == 1 else None
            if type(only) is SnapshotBatchProcessor:
                # Instance attributes: they shadow the loops of the class.
                self.on_start = _start_nothing  # type: ignore[method-assign]
                self._on_ending = _end_nothing  # type: ignore[method-assign]
                self.on_end = only.on_end  # type: ignore[method-assign]
            else:
                for name in ("on_start", "_on_ending", "on_end"):
                    self.__dict__.pop(name, None)
