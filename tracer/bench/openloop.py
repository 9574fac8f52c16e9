"""The open loop of ``hoptrace bench --rate`` (``docs/bench.md``): requests sent on a
schedule, whether or not earlier ones were answered, as production traffic arrives.

- **The schedule.** Inter-arrival times drawn from the arrival process
  (:class:`Arrivals`): ``poisson`` (exponential gaps, the default), ``constant``
  (every 1/rate seconds) or ``gamma`` with a burstiness (the gamma shape: 1 is
  Poisson, below 1 burstier, above 1 steadier; vLLM's ``--burstiness``), all with the
  mean 1/rate. Each request has an intended send time, and is sent then.
- **No coordinated omission.** Latency is measured from the intended send time (what
  a user arriving then waits) beside the latency from the actual send; the send lag
  (actual less intended, less any wait for a slot) says how late the client itself
  was.
- **``--max-concurrency``.** A client-side cap on requests in flight: a request whose
  time has come waits for a slot, and that queue time is reported.

    gaps = Arrivals("gamma", 0.5).gaps_s(rate_per_s=8.0, count=100, seed=1)
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tracer._errors import ConfigError

__all__ = ["ARRIVALS", "Arrivals", "Sent", "parse_rates", "send_open_loop"]

ARRIVALS = ("poisson", "constant", "gamma")


@dataclass(frozen=True, slots=True)
class Arrivals:
    """An arrival process: its kind and, for ``gamma``, its burstiness.

    Raises:
        ConfigError: an unknown kind, or a burstiness that is not a positive finite
            number (or not 1 with a kind other than gamma).
    """

    kind: str = "poisson"
    burstiness: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in ARRIVALS:
            raise ConfigError(f"--arrivals must be one of {', '.join(ARRIVALS)}, got {self.kind!r}")
        if not (self.burstiness > 0 and math.isfinite(self.burstiness)):
            raise ConfigError(f"--burstiness must be a finite number > 0, got {self.burstiness!r}")
        if self.kind != "gamma" and self.burstiness != 1.0:
            raise ConfigError("--burstiness shapes gamma arrivals: add --arrivals gamma")

    def gaps_s(self, rate_per_s: float, count: int, seed: int) -> list[float]:
        """``count`` inter-arrival times (s) of mean ``1 / rate_per_s``; the first
        request goes at once (its gap is 0)."""
        rng = random.Random(seed)
        mean = 1.0 / rate_per_s
        if self.kind == "constant":
            draw: Callable[[], float] = lambda: mean  # noqa: E731
        elif self.kind == "poisson":
            draw = lambda: rng.expovariate(rate_per_s)  # noqa: E731
        else:
            shape = self.burstiness
            draw = lambda: rng.gammavariate(shape, mean / shape)  # noqa: E731
        return [0.0] + [draw() for _ in range(count - 1)] if count > 0 else []

    def describe(self) -> str:
        """``poisson``, ``constant`` or ``gamma (burstiness B)``."""
        return f"gamma (burstiness {self.burstiness:g})" if self.kind == "gamma" else self.kind


def parse_rates(text: str) -> list[float]:
    """``--rate R[,R...]`` as sorted distinct rates (requests/s).

    Raises:
        ConfigError: a part that is not a positive finite number.
    """
    rates: set[float] = set()
    for part in text.split(","):
        try:
            rate = float(part)
        except ValueError:
            rate = float("nan")
        if not (rate > 0 and math.isfinite(rate)):
            raise ConfigError(
                f"--rate must be requests per second > 0 separated by commas (e.g. 2,4,8), "
                f"got {text!r}"
            )
        rates.add(rate)
    return sorted(rates)


@dataclass(frozen=True, slots=True)
class Sent:
    """When one request was meant to go and what held it: its intended send time (s
    after the first one's), seconds from it to the actual send (``lag_s``, the wait
    for a slot included) and the wait for a slot of ``--max-concurrency``
    (``queue_s``)."""

    at_s: float
    lag_s: float
    queue_s: float


async def send_open_loop(
    gaps_s: list[float],
    send: Callable[[Sent], Awaitable[object]],
    max_concurrency: int | None = None,
) -> tuple[list[object], float]:
    """Send one request per gap, each at its intended time (the sum of the gaps so
    far), with ``send(Sent)``; a request whose time has come waits for a slot when
    ``max_concurrency`` requests are in flight. Returns what each ``send`` returned,
    in send order, and the wall time (s) from the first intended send to the last
    answer."""
    loop = asyncio.get_running_loop()
    slots = asyncio.Semaphore(max_concurrency) if max_concurrency else None
    started = loop.time()
    results: list[object] = [None] * len(gaps_s)

    async def one(index: int, intended: float) -> None:
        if slots is not None:
            await slots.acquire()
        try:
            now = loop.time()
            queue = max(now - max(intended, _ready[index]), 0.0) if slots is not None else 0.0
            lag = max(now - intended, 0.0)
            results[index] = await send(Sent(intended - started, lag, queue))
        finally:
            if slots is not None:
                slots.release()

    _ready = [0.0] * len(gaps_s)  # when each request's time came and the loop saw it
    tasks = []
    intended = started
    for index, gap in enumerate(gaps_s):
        intended += gap
        delay = intended - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        _ready[index] = loop.time()
        tasks.append(asyncio.create_task(one(index, intended)))
    await asyncio.gather(*tasks)
    return results, loop.time() - started
