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
exporter's thread encodes the snapshots (:func:`tracer._json_export.encode_snapshots`)
with less work than a ``ReadableSpan`` needs.

It honours the ``OTEL_BSP_*`` variables as the SDK's processor does (keywords win):
``OTEL_BSP_SCHEDULE_DELAY`` (5000 ms), ``OTEL_BSP_MAX_QUEUE_SIZE`` (2048),
``OTEL_BSP_MAX_EXPORT_BATCH_SIZE`` (512). A full queue drops the newest span and logs
once. Like the SDK it never raises into the application.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.context import (
    _SUPPRESS_INSTRUMENTATION_KEY,
    Context,
    attach,
    detach,
    set_value,
)
from opentelemetry.sdk.trace import (
    ReadableSpan,
    Span,
    SpanProcessor,
    SynchronousMultiSpanProcessor,
)
from opentelemetry.trace import TraceFlags

__all__ = [
    "RoutingSpanProcessor",
    "Snapshot",
    "SnapshotBatchProcessor",
    "SnapshotExporter",
    "snapshot",
]

_logger = logging.getLogger(__name__)

#: A flat tuple: trace_id, span_id, parent_span_id or None, name, OTLP kind, start_ns,
#: end_ns, status code, status message or None, resource key, scope name, scope
#: version or None, then the attributes (count n, n keys, n values), the events (count,
#: then each: name, time_ns, attributes) and the links (count, then each: trace_id,
#: span_id, attributes).
Snapshot = tuple[Any, ...]


class SnapshotExporter(Protocol):
    """What the processor sends batches to (``tracer._json_export.JsonSpanExporter``)."""

    def export_snapshots(self, items: Sequence[Snapshot], resources: Mapping[int, Any]) -> Any:
        """Send one batch; ``resources`` maps each snapshot's resource key to its
        resource."""

    def shutdown(self) -> None:
        """Stop sending."""


_DEFAULTS = {
    "OTEL_BSP_SCHEDULE_DELAY": 5000,
    "OTEL_BSP_MAX_QUEUE_SIZE": 2048,
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": 512,
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


def _attribute_dict(attrs: Any) -> dict[str, Any]:
    """The attributes as a dict (the SDK's BoundedAttributes keep one inside; any
    mapping works)."""
    if not attrs:
        return {}
    inner = getattr(attrs, "_dict", None)
    return inner if type(inner) is dict else dict(attrs)


def _extras(span: ReadableSpan) -> tuple[Any, ...]:
    """The events and links part of a snapshot."""
    out: list[Any] = []
    events = span.events
    out.append(len(events))
    for event in events:
        d = _attribute_dict(event.attributes)
        out.extend((event.name, event.timestamp, len(d), *d, *d.values()))
    links = span.links
    out.append(len(links))
    for link in links:
        d = _attribute_dict(link.attributes)
        out.extend((link.context.trace_id, link.context.span_id, len(d), *d, *d.values()))
    return tuple(out)


_NO_EXTRAS = (0, 0)
_SAMPLED = TraceFlags.SAMPLED


def snapshot(span: ReadableSpan, resource_key: int) -> Snapshot:
    """The :data:`Snapshot` of an ended span: one flat tuple. Flat, because the
    collector untracks a tuple only when what it holds is untracked already, and it
    may visit an outer tuple before the inner ones."""
    if type(span) is ReadableSpan:  # what the SDK hands ``on_end``
        return _snapshot_fields(span, resource_key)
    ctx = span.context
    parent = span.parent
    status = span.status
    scope = span.instrumentation_scope
    # The span's own attribute object: ReadableSpan.attributes wraps it in a proxy.
    raw = getattr(span, "_attributes", None)
    d = _attribute_dict(raw if raw is not None else span.attributes)
    # Events and links are rare (the first-token mark): read them only when present.
    extras = _extras(span) if span.events or span.links else _NO_EXTRAS
    return (
        ctx.trace_id,
        ctx.span_id,
        parent.span_id if parent is not None else None,
        span.name,
        span.kind.value + 1,  # the SDK counts from INTERNAL = 0, OTLP from 1
        span.start_time or 0,
        span.end_time or 0,
        status.status_code.value,
        status.description or None,
        resource_key,
        scope.name if scope is not None else "",
        scope.version if scope is not None else None,
        len(d),
        *d,
        *d.values(),
        *extras,
    )


def _snapshot_fields(span: Any, resource_key: int) -> Snapshot:
    """:func:`snapshot` of a plain ``ReadableSpan``, read from the fields its
    constructor sets rather than through a dozen properties (a third of the
    processor's work per span; a test compares both ways)."""
    trace_id, span_id = span._context[:2]  # a SpanContext is a tuple
    parent = span._parent
    status = span._status
    scope = span._instrumentation_scope
    raw = span._attributes
    d = raw._dict if type(raw) is BoundedAttributes else _attribute_dict(raw)
    # A BoundedList's truth is a Python-level __len__: look at its deque instead.
    events, links = span._events, span._links
    has_extras = getattr(events, "_dq", events) or getattr(links, "_dq", links)
    return (
        trace_id,
        span_id,
        parent[1] if parent is not None else None,
        span._name,
        span._kind._value_ + 1,  # the SDK counts from INTERNAL = 0, OTLP from 1
        span._start_time or 0,
        span._end_time or 0,
        status._status_code._value_,
        status._description or None,
        resource_key,
        scope.name if scope is not None else "",
        scope.version if scope is not None else None,
        len(d),
        *d,
        *d.values(),
        *(_extras(span) if has_extras else _NO_EXTRAS),
    )


class SnapshotBatchProcessor(SpanProcessor):
    """Queue snapshots of ended, sampled spans; export them in batches on one thread.

    Args:
        exporter: the JSON exporter that sends the batches.
        schedule_delay_millis: the longest a span waits before its batch is sent.
        max_queue_size: spans held at most; more are dropped.
        max_export_batch_size: spans per export; a full batch is sent at once.

    Raises:
        ValueError: a size or delay that is not positive, or a batch larger than the queue.
    """

    def __init__(
        self,
        exporter: SnapshotExporter,
        *,
        schedule_delay_millis: int | None = None,
        max_queue_size: int | None = None,
        max_export_batch_size: int | None = None,
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
        if delay <= 0:
            raise ValueError(f"schedule_delay_millis must be positive, got {delay!r}")
        if queue <= 0 or batch <= 0:
            raise ValueError(f"queue and batch sizes must be positive, got {queue!r}, {batch!r}")
        if batch > queue:
            raise ValueError(
                f"max_export_batch_size must be at most max_queue_size, got {batch!r} > {queue!r}"
            )
        self._exporter = exporter
        self._delay_s = delay / 1000
        self._max_queue = queue
        self._max_batch = batch
        self._resources: dict[int, Any] = {}
        self._shutdown = False
        self._dropped_logged = False
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
        self._worker = threading.Thread(target=self._work, name="hoptrace-span-export", daemon=True)
        self._worker.start()

    @property
    def span_exporter(self) -> SnapshotExporter:
        """The exporter the batches go to."""
        return self._exporter

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Nothing to do when a span starts."""

    def on_end(self, span: ReadableSpan) -> None:
        """Queue a snapshot of a sampled span; never raises."""
        if self._shutdown:
            return
        try:
            plain = type(span) is ReadableSpan  # fields instead of properties, as snapshot
            # The flags are a SpanContext's fourth field (it is a tuple).
            ctx: Any = span._context if plain else span.context
            if not ctx[3] & _SAMPLED:
                return
            resource = span._resource if plain else span.resource
            key = id(resource)
            if key not in self._resources:
                self._resources[key] = resource  # held, so the id stays its own
            item = _snapshot_fields(span, key) if plain else snapshot(span, key)
        except Exception:  # noqa: BLE001 - telemetry never breaks the app
            _logger.debug("hoptrace: could not snapshot a span", exc_info=True)
            return
        queue = self._queue
        if len(queue) >= self._max_queue:
            if not self._dropped_logged:
                self._dropped_logged = True
                _logger.warning("hoptrace: the span queue is full; dropping spans")
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
            while queue and (first or everything or len(queue) >= self._max_batch):
                first = False
                count = min(self._max_batch, len(queue))
                batch = [queue.popleft() for _ in range(count)]
                token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
                try:
                    self._exporter.export_snapshots(batch, self._resources)
                except Exception:  # noqa: BLE001 - telemetry never breaks the app
                    _logger.exception("hoptrace: exporting spans failed")
                finally:
                    detach(token)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export every queued span now; False after shutdown."""
        if self._shutdown:
            return False
        self._export(everything=True)
        return True

    def shutdown(self) -> None:
        """Export what is queued, stop the thread and shut the exporter down."""
        if self._shutdown:
            return
        self._shutdown = True
        self._wake.set()
        self._worker.join(30)
        self._exporter.shutdown()


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
