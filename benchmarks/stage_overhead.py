"""Cost of ``@tracer.stage`` against a bare ``start_as_current_span``, on one provider.

Both run interleaved, round after round, on the same SDK provider (a span processor
that drops spans, so export cost is not measured); the ratio of the medians is
printed. Target: at most 1.10x.

    python benchmarks/stage_overhead.py [--rounds 30] [--calls 5000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

import tracer
from tracer import attributes as attrs


class _Drop(SpanProcessor):
    def on_end(self, span):  # noqa: D401 - the SDK interface
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=5000)
    args = parser.parse_args()

    provider = TracerProvider()
    provider.add_span_processor(_Drop())
    trace.set_tracer_provider(provider)
    bare_tracer = provider.get_tracer("bench")

    def work() -> int:
        return 1

    @tracer.stage("auth")
    def decorated() -> int:
        return work()

    def bare() -> int:
        with bare_tracer.start_as_current_span("bare", attributes={attrs.STAGE: "auth"}):
            return work()

    def run(fn) -> float:
        start = time.perf_counter_ns()
        for _ in range(args.calls):
            fn()
        return (time.perf_counter_ns() - start) / args.calls

    for fn in (decorated, bare):  # warm-up
        run(fn)
    ours, theirs = [], []
    for r in range(args.rounds):
        pair = (decorated, bare) if r % 2 == 0 else (bare, decorated)
        for fn in pair:
            (ours if fn is decorated else theirs).append(run(fn))
    m_ours, m_bare = statistics.median(ours), statistics.median(theirs)
    ratio = m_ours / m_bare
    print(f"@tracer.stage:            {m_ours / 1000:.2f} us/call (median of {args.rounds} rounds)")
    print(f"start_as_current_span:    {m_bare / 1000:.2f} us/call")
    print(
        f"ratio stage/bare:         {ratio:.3f}x  (target <= 1.10x: {'PASS' if ratio <= 1.10 else 'FAIL'})"
    )

    os.environ["OTEL_SDK_DISABLED"] = "true"
    disabled = TracerProvider()  # the SDK hands out no-op tracers when disabled
    trace._TRACER_PROVIDER = disabled  # type: ignore[attr-defined]  # benchmark only

    def plain() -> int:
        return work()

    off = statistics.median(run(decorated) for _ in range(5))
    base = statistics.median(run(plain) for _ in range(5))
    print(
        f"OTEL_SDK_DISABLED=true:   {off / 1000:.3f} us/call against {base / 1000:.3f} us undecorated"
    )


if __name__ == "__main__":
    main()
