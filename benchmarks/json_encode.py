"""Microseconds per span of the OTLP JSON encoder on the demo model service's own spans.

The model service (FastAPI server span with its HTTP attributes, the ``inference``
stage span with GenAI attributes, engine latencies and the first-token event) runs in
this process with a capturing provider; its spans, repeated to a batch of 512, are
encoded many times and the best round is reported (the least disturbed by other work
on a shared machine).

    python benchmarks/json_encode.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from demo_app.model import create_model_app
from demo_app.profiles import get_profile
from tracer.sdk.batch import snapshot
from tracer.sdk.json_export import encode, encode_snapshots
from tracer.testing import call_asgi, capture_spans

_BODY = json.dumps(
    {
        "model": "sim-1",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 8,
        "stream": True,
    }  # fmt: skip
).encode()
_SCOPE = {
    "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
    "scheme": "http", "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
    "query_string": b"", "root_path": "", "client": ("127.0.0.1", 50000),
    "server": ("127.0.0.1", 8000),
    "headers": [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json"),
                (b"content-length", str(len(_BODY)).encode())],
}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    app = create_model_app(get_profile("bare"))
    with capture_spans() as captured:
        asyncio.run(call_asgi(app, _SCOPE, _BODY))
    spans = captured.spans
    batch = (spans * (512 // len(spans) + 1))[:512]
    resources = {0: spans[0].resource}
    snapshots = [snapshot(s, 0) for s in batch]
    names = ", ".join(f"{s.name} ({len(s.attributes or {})} attributes)" for s in spans)
    print(f"spans: {names}")
    for label, run in (
        ("ReadableSpans (encode)", lambda: encode(batch)),
        ("snapshots (encode_snapshots)", lambda: encode_snapshots(snapshots, resources)),
    ):
        best = float("inf")
        for _ in range(args.rounds):
            started = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - started)
        print(f"{label}: {best / len(batch) * 1e6:.2f} us a span (best of {args.rounds} x 512)")


if __name__ == "__main__":
    main()
