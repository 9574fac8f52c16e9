"""ASGI apps that answer every request with more than a client should read, and a way
to run hoptrace in a child process and learn its peak memory."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import zlib
from typing import Any

#: What each endless answer sends at most, so a test that fails still ends.
TOTAL_BYTES = 400 * 1024 * 1024
_CHUNK = 256 * 1024


def _gzip_of_zeros(total: int) -> list[bytes]:
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(1024 * 1024)
    parts = [z.compress(zeros) for _ in range(total // len(zeros))]
    parts.append(z.flush())
    return [p for p in parts if p]


_BOMB: list[bytes] = []


def endless(kind: str) -> Any:
    """An app answering ``kind``: ``sse_line`` (one SSE line that never ends),
    ``error_body`` (a 500 with an endless body), ``json`` (endless JSON), ``gzip`` (a
    gzip bomb: 400 MiB of zeros in about 400 KiB) or ``gzip_sse`` (the same as an
    event stream)."""
    statuses = {"error_body": 500}
    types = {"sse_line": b"text/event-stream", "gzip_sse": b"text/event-stream"}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while True:
            message = await receive()
            if not message.get("more_body"):
                break
        gone = asyncio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        watcher = asyncio.ensure_future(watch())
        headers = [(b"content-type", types.get(kind, b"application/json"))]
        if kind.startswith("gzip"):
            headers.append((b"content-encoding", b"gzip"))
            if not _BOMB:
                _BOMB.extend(_gzip_of_zeros(TOTAL_BYTES))
            chunks: Any = iter(_BOMB)
        else:
            first = {"sse_line": b"data: ", "json": b'{"data": ["'}.get(kind, b"")
            chunks = iter([first] + [b"x" * _CHUNK] * (TOTAL_BYTES // _CHUNK))
        await send(
            {"type": "http.response.start", "status": statuses.get(kind, 200), "headers": headers}
        )
        try:
            for chunk in chunks:
                if gone.is_set():
                    return
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        except Exception:  # the client went away mid-answer
            return
        finally:
            watcher.cancel()

    return app


_PEAK = """
import resource, subprocess, sys
out = sys.argv.pop(1)
done = subprocess.run([sys.executable, "-m", "tracer.cli", *sys.argv[1:]])
with open(out, "w") as fh:
    fh.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(done.returncode)
"""


def hoptrace_peak(*args: str, timeout: float = 120, **kwargs: Any) -> tuple[Any, float]:
    """Run ``hoptrace ARGS`` in a child process: (the completed process, its peak
    resident memory in MiB, as a parent of its own sees it)."""
    fd, report = tempfile.mkstemp(suffix=".peak")
    os.close(fd)
    try:
        result = subprocess.run(
            [sys.executable, "-c", _PEAK, report, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            **kwargs,
        )
        with open(report) as fh:
            text = fh.read().strip()
        return result, (int(text) / 1024 if text else float("nan"))  # ru_maxrss is KiB
    finally:
        os.unlink(report)
