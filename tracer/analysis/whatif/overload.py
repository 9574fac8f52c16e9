"""What an open loop's arrivals say about its run (``docs/whatif.md``): whether its
queue grew through it (overloaded: no steady state to project), and whether it has
any spread in time at all.

- **Overloaded.** Requests in flight, counted at each arrival, grow through the run
  (a straight line fitted to them rises by more than their mean, and by at least
  :data:`MIN_GROWTH`), and the requests answered while they were sent fall short of
  the rate they were sent at (below :data:`ANSWERED_SHARE` of it). An open M/M/1 above
  capacity grows so, linearly; a stable run's in-flight count wanders about its mean.
- **No spread.** Every request started within one request's time (the span of the
  start times under the median end-to-end time): a file of traces that start
  together, not traffic; there is no arrival process to read.

A closed loop (a bench of N clients) is never overloaded: its clients wait.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracer.analysis.whatif.loadrun import LoadRun

__all__ = ["ANSWERED_SHARE", "MIN_GROWTH", "Overload", "no_spread", "overload", "queue_growth"]

#: The fewest requests by which the in-flight count must grow to call a run overloaded.
MIN_GROWTH = 5.0
#: Answered below this share of the rate sent: not keeping up.
ANSWERED_SHARE = 0.9


@dataclass(frozen=True)
class Overload:
    """An open loop whose queue grew through the run."""

    sent_per_s: float
    answered_per_s: float
    #: requests in flight: how much the fitted line rose over the run, and the mean
    growth: float
    in_flight: float

    def describe(self) -> str:
        """One phrase: the rates and how the queue grew."""
        return (
            f"overloaded: {self.sent_per_s:.1f} requests/s sent, {self.answered_per_s:.1f} "
            f"answered, the requests in flight grew by {self.growth:.0f} through the run"
        )


def queue_growth(run: LoadRun) -> tuple[float, float]:
    """The requests in flight at each arrival: how much a straight line fitted to them
    rises from the first arrival to the last, and their mean."""
    starts = np.asarray(run.starts_s, dtype=float)
    ends = np.sort(starts + np.asarray(run.e2e_ms, dtype=float) / 1000.0)
    order = np.sort(starts)
    if len(order) < 3 or order[-1] <= order[0]:
        return 0.0, 0.0
    in_flight = np.arange(1, len(order) + 1) - np.searchsorted(ends, order, side="right")
    slope = float(np.polyfit(order, in_flight.astype(float), 1)[0])
    return slope * float(order[-1] - order[0]), float(in_flight.mean())


def overload(run: LoadRun) -> Overload | None:
    """The run's overload (module docstring), or None: a closed loop, or a steady one."""
    if run.clients:
        return None
    growth, mean = queue_growth(run)
    span = run.arrival_span_s
    if span <= 0 or growth < max(MIN_GROWTH, mean):
        return None
    ends = np.asarray(run.starts_s) + np.asarray(run.e2e_ms) / 1000.0
    answered = float(np.count_nonzero(ends <= span)) / span
    sent = run.arrival_per_s
    if answered >= ANSWERED_SHARE * sent:
        return None
    return Overload(sent_per_s=sent, answered_per_s=answered, growth=growth, in_flight=mean)


def no_spread(run: LoadRun) -> str | None:
    """Why an open loop's arrivals cannot be read (module docstring), or None."""
    if run.clients or not run.e2e_ms:
        return None
    median = float(np.median(run.e2e_ms))
    span_ms = run.arrival_span_s * 1000.0
    if span_ms >= median:
        return None
    return (
        f"its {len(run.e2e_ms)} traces started within {span_ms:,.1f} ms of each other, "
        f"less than one request's time ({median:,.0f} ms at P50): no arrivals to read"
    )
