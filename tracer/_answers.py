"""A byte limit on every HTTP answer hoptrace reads (bench, Jaeger, Tempo).

A server may answer with an endless body, a line that never ends or a gzip bomb;
``--timeout`` bounds time only, and memory went first. :func:`limit_answers` gives an
httpx client a response hook that counts the bytes of each answer after
decompression and raises :class:`AnswerTooLarge` past the limit. It inflates the
body itself, 64 KiB at a time (httpx would inflate a whole network read at once,
which is up to a thousand times its size), so what an answer holds is bounded by the
limit whatever its encoding. Only ``gzip`` and ``deflate`` are asked for.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx

__all__ = [
    "ANSWER_BYTES_ENV",
    "DEFAULT_BENCH_ANSWER_BYTES",
    "DEFAULT_SOURCE_ANSWER_BYTES",
    "AnswerTooLarge",
    "limit_answers",
    "source_answer_limit",
]

#: The largest answer ``bench`` reads from the endpoint (a chat completion or stream).
DEFAULT_BENCH_ANSWER_BYTES = 16 * 1024 * 1024
#: The largest answer read from a trace backend (one search, one trace).
DEFAULT_SOURCE_ANSWER_BYTES = 256 * 1024 * 1024
#: Sets the source limit (``--max-answer-bytes`` wins).
ANSWER_BYTES_ENV = "HOPTRACE_MAX_ANSWER_BYTES"
_STEP = 64 * 1024
_ENCODINGS = "gzip, deflate"


class AnswerTooLarge(httpx.DecodingError):
    """An answer is larger than the limit, after decompression."""

    def __init__(self, limit_bytes: int, request: httpx.Request | None = None):
        super().__init__(f"the answer is larger than {limit_bytes} bytes", request=request)
        self.limit_bytes = limit_bytes


def source_answer_limit(value: int | str | None = None) -> int:
    """The source limit in bytes: ``value``, else ``$HOPTRACE_MAX_ANSWER_BYTES``, else
    :data:`DEFAULT_SOURCE_ANSWER_BYTES`.

    Raises:
        ConfigError: not a size, or not positive.
    """
    from collector.memory import parse_size
    from tracer._errors import ConfigError

    if value is None:
        value = os.environ.get(ANSWER_BYTES_ENV) or DEFAULT_SOURCE_ANSWER_BYTES
    limit = parse_size(value, "--max-answer-bytes")
    if limit <= 0:
        raise ConfigError(f"--max-answer-bytes must be positive, got {value!r}")
    return limit


class _Inflater:
    """Decoded bytes of one answer, at most ``limit`` in all."""

    def __init__(self, encoding: str, limit: int, request: httpx.Request):
        self.limit, self.request, self.size = limit, request, 0
        self.kind = encoding
        self._z: Any = None
        if encoding == "gzip":
            self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._z = zlib.decompressobj()

    def _count(self, out: bytes) -> bytes:
        self.size += len(out)
        if self.size > self.limit:
            raise AnswerTooLarge(self.limit, self.request)
        return out

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._z is None:
            yield self._count(data)
            return
        while data:
            try:
                out = self._z.decompress(data, _STEP)
            except zlib.error as exc:
                if self.kind == "deflate" and not self.size:  # raw deflate, as httpx allows
                    self.kind, self._z = "raw", zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                message = f"{self.kind} answer: {exc}"
                raise httpx.DecodingError(message, request=self.request) from exc
            if out:
                yield self._count(out)
            data = self._z.unconsumed_tail
            if self._z.eof and self._z.unused_data.strip(b"\0"):  # another gzip member
                data, self._z = self._z.unused_data, zlib.decompressobj(16 + zlib.MAX_WBITS)


class _Limited(httpx.SyncByteStream, httpx.AsyncByteStream):
    def __init__(self, stream: Any, inflater: _Inflater):
        self._stream, self._inflater = stream, inflater

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._stream:
            yield from self._inflater.feed(chunk)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            for out in self._inflater.feed(chunk):
                yield out

    def close(self) -> None:
        self._stream.close()

    async def aclose(self) -> None:
        await self._stream.aclose()


def _wrap(response: httpx.Response, limit: int) -> None:
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("identity", "", "gzip", "deflate"):
        raise httpx.DecodingError(
            f"the answer's content encoding {encoding!r} was not asked for",
            request=response.request,
        )
    # httpx must not inflate it again, nor check the length it had on the wire.
    for header in ("content-encoding", "content-length"):
        if header in response.headers:
            del response.headers[header]
    response.stream = _Limited(response.stream, _Inflater(encoding, limit, response.request))


def limit_answers(client: httpx.Client | httpx.AsyncClient, limit_bytes: int) -> None:
    """Make every answer ``client`` reads at most ``limit_bytes`` after decompression
    (:class:`AnswerTooLarge`, an :class:`httpx.DecodingError`, past it)."""
    client.headers["accept-encoding"] = _ENCODINGS
    if isinstance(client, httpx.AsyncClient):

        async def hook(response: httpx.Response) -> None:
            _wrap(response, limit_bytes)

        client.event_hooks["response"].append(hook)
    else:
        client.event_hooks["response"].append(lambda response: _wrap(response, limit_bytes))
