"""Time of each form of ``@tracer.stage`` per call: a function, a coroutine, a generator,
an async generator and a ``with`` block, on one SDK provider with the sampler
``tracer.setup`` installs by default and a span processor that drops the spans (export
is not measured). The forms run at the top (each span a root) and, with
``--under-a-span``, under a sampled span, as stages run in a service.

Each form runs ``--calls`` times a round, the forms interleaved, and the fastest round
of each is printed (the least disturbed by other work on a shared machine), with what
the undecorated function costs. Coroutines and async generators are driven by hand,
without an event loop, so that only the stage is timed.

    python benchmarks/stage_forms.py [--rounds 15] [--calls 20000] [--under-a-span]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

import tracer
from tracer.sampling.samplers import ParentBasedAlwaysOn


class _Drop(SpanProcessor):
    def on_end(self, span):  # noqa: D401 - the SDK interface
        pass


def _drive(coroutine) -> object:
    """Run a coroutine that never waits to its end, without an event loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    raise RuntimeError("the coroutine waited")


def _drain(agen) -> int:
    """Pull every item of an async generator that never waits, without an event loop."""
    count = 0
    while True:
        try:
            agen.__anext__().send(None)
        except StopIteration:
            count += 1
        except StopAsyncIteration:
            return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--under-a-span", action="store_true")
    args = parser.parse_args()

    provider = TracerProvider(sampler=ParentBasedAlwaysOn())
    provider.add_span_processor(_Drop())
    trace.set_tracer_provider(provider)
    block = tracer.stage("context")

    def plain() -> int:
        return 1

    @tracer.stage("auth")
    def function() -> int:
        return 1

    @tracer.stage("auth")
    async def coroutine() -> int:
        return 1

    @tracer.stage("inference")
    def generator():
        yield from range(4)

    @tracer.stage("inference")
    async def async_generator():
        for i in range(4):
            yield i

    def with_block() -> int:
        with block:
            return 1

    forms: dict[str, Callable[[], object]] = {
        "undecorated function": plain,
        "function": function,
        "coroutine": lambda: _drive(coroutine()),
        "generator (4 items)": lambda: sum(generator()),
        "async generator (4 items)": lambda: _drain(async_generator()),
        "with block": with_block,
    }
    if args.under_a_span:
        outer = provider.get_tracer("bench").start_span("request")
        trace.use_span(outer).__enter__()  # current for the rest of the run
    best = dict.fromkeys(forms, float("inf"))
    for fn in forms.values():  # warm-up
        for _ in range(1000):
            fn()
    for _ in range(args.rounds):
        for name, fn in forms.items():
            started = time.perf_counter_ns()
            for _ in range(args.calls):
                fn()
            best[name] = min(best[name], (time.perf_counter_ns() - started) / args.calls)
    for name, ns in best.items():
        print(f"{name:<27} {ns / 1000:6.3f} us a call (best of {args.rounds} x {args.calls})")


if __name__ == "__main__":
    main()
