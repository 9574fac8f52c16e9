"""One reader of server-sent events, as the HTML standard's event-stream format says.

``data:`` with or without the one optional space after the colon, several ``data``
lines of one event joined by newlines, comment lines (``:`` first, such as keep-alive
pings) and other fields (``event``, ``id``, ``retry``) skipped, an event dispatched
at the blank line that ends it. OpenAI-compatible servers send one JSON object per
event and ``[DONE]`` at the end.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator

__all__ = ["aiter_sse_data"]


async def aiter_sse_data(lines: AsyncIterable[str]) -> AsyncIterator[str]:
    """The ``data`` of each event in ``lines`` (lines without their line breaks).

    An event still open when the lines end is dispatched too: servers that close
    the stream right after the last ``data`` line lose nothing.
    """
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        field, colon, value = line.partition(":")
        if field != "data":
            continue
        if colon and value.startswith(" "):
            value = value[1:]
        data.append(value)
    if data:
        yield "\n".join(data)
