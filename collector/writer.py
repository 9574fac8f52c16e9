"""One thread that commits the rows of many requests, several per transaction.

A request's rows wait in a :class:`Ticket`. The writer takes what is queued (up to
:data:`GROUP_SPANS` rows, never splitting a request) and commits it in one
transaction, then settles each ticket with the number of rows or the exception; between
commits (and every second when idle) it lets the store start its next partition and
drop what retention says is old (:meth:`SpanStore.maintain`). A
ticket whose client has gone is skipped; past the time given to
:meth:`Writer.refuse_after` the tickets not yet started are settled with
:class:`ShuttingDown`, so a stopping collector answers every request it holds.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from collector.store import SpanStore

__all__ = ["GROUP_SPANS", "ShuttingDown", "Ticket", "Writer"]

_logger = logging.getLogger(__name__)
#: Rows in one transaction, at most (a single larger request is committed alone).
GROUP_SPANS = 50_000
#: Seconds between the store's upkeep when no batch comes.
MAINTAIN_S = 1.0


class ShuttingDown(Exception):
    """The collector is stopping: the request was not stored and should be sent again."""


class Ticket:
    """One request's rows, waiting to be committed; settles an asyncio future."""

    __slots__ = ("rows", "abandoned", "future", "_loop")

    def __init__(self, rows: list[tuple], loop: asyncio.AbstractEventLoop):
        self.rows = rows
        #: Set from the event loop when the client has gone: the rows are not written.
        self.abandoned = False
        self.future: asyncio.Future[int | BaseException] = loop.create_future()
        self._loop = loop

    def abandon(self) -> None:
        """The client has gone: skip the rows if they are not being written yet."""
        self.abandoned = True
        self.rows = []

    def settle(self, result: int | BaseException) -> None:
        """Hand ``result`` to the waiting request (from any thread)."""
        try:
            self._loop.call_soon_threadsafe(_set_result, self.future, result)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass


def _set_result(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():
        future.set_result(result)


class Writer:
    """The writer thread of ``store``; started at once. ``on_commit`` is given the rows
    of every group committed (the live metrics' feed; it must not block)."""

    def __init__(self, store: SpanStore, on_commit: Callable[[list[tuple]], None] | None = None):
        self._store = store
        self._on_commit = on_commit
        self._queue: queue.SimpleQueue[Ticket | None] = queue.SimpleQueue()
        self._refuse_at: float | None = None
        self._upkeep_failed = False
        self._thread = threading.Thread(target=self._run, name="hoptrace-writer", daemon=True)
        self._thread.start()

    def submit(self, ticket: Ticket) -> None:
        """Queue ``ticket``; it is settled when its rows are committed or refused."""
        if self._refusing():
            ticket.settle(ShuttingDown("the collector is shutting down"))
        else:
            self._queue.put(ticket)

    def refuse_after(self, deadline: float) -> None:
        """From ``deadline`` (``time.monotonic()``) on, settle every ticket not yet being
        written with :class:`ShuttingDown` instead of writing it."""
        if self._refuse_at is None or deadline < self._refuse_at:
            self._refuse_at = deadline

    def close(self, timeout_s: float = 30.0) -> None:
        """Commit what was started, refuse the rest and stop the thread."""
        self.refuse_after(time.monotonic())
        self._queue.put(None)
        self._thread.join(timeout=timeout_s)

    def _run(self) -> None:
        stop = False
        while not stop:
            try:
                first = self._queue.get(timeout=MAINTAIN_S)
            except queue.Empty:
                self._maintain()
                continue
            if first is None:
                break
            group = [first]
            size = len(first.rows)
            while size < GROUP_SPANS:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                group.append(nxt)
                size += len(nxt.rows)
            self._commit(group)
            self._maintain()
        while True:  # what came after the stop: refused, never left unanswered
            try:
                late = self._queue.get_nowait()
            except queue.Empty:
                return
            if late is not None:
                late.settle(ShuttingDown("the collector is shutting down"))

    def _maintain(self) -> None:
        try:
            self._store.maintain()
        except Exception as exc:  # ingest goes on; the next upkeep tries again
            if not self._upkeep_failed:
                self._upkeep_failed = True
                _logger.error("could not apply the store's retention: %s", exc)

    def _refusing(self) -> bool:
        return self._refuse_at is not None and time.monotonic() >= self._refuse_at

    def _commit(self, group: list[Ticket]) -> None:
        if self._refusing():
            for ticket in group:
                ticket.settle(ShuttingDown("the collector is shutting down"))
            return
        live = [t for t in group if not t.abandoned]
        rows = [row for t in live for row in t.rows]
        result: int | BaseException = 0
        if rows:
            try:
                self._store.write_rows(rows)
            except Exception as exc:  # each waiting request answers 503
                _logger.error("could not store %d spans: %s", len(rows), exc)
                result = exc
        for ticket in group:
            ticket.settle(len(ticket.rows) if isinstance(result, int) else result)
            ticket.rows = []
        if rows and isinstance(result, int) and self._on_commit is not None:
            self._on_commit(rows)  # after the answers: the live metrics wait, ingest does not
