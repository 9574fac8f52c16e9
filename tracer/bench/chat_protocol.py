"""Reading an OpenAI-compatible chat answer strictly, for the bench.

A server under test that answers anything else than the format asked for (an HTML page
with status 200, a JSON body to a streaming request, a list where an object belongs, a
stream cut before ``[DONE]``, an answer without a token) has failed the request: these
raise :class:`ProtocolError` with a short description of the first thing wrong, which
the bench counts as a ``protocol`` error and shows as an example.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "ProtocolError",
    "body_content",
    "check_content_type",
    "chunk_content",
]

_EXAMPLE_CHARS = 80


class ProtocolError(Exception):
    """The answer is not what an OpenAI-compatible chat endpoint sends."""


def _show(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= _EXAMPLE_CHARS else text[: _EXAMPLE_CHARS - 1] + "…"


def check_content_type(content_type: str, stream: bool) -> None:
    """Raise unless the answer's media type is the one asked for."""
    media = content_type.split(";", 1)[0].strip().lower()
    wanted = "text/event-stream" if stream else "application/json"
    if media != wanted:
        raise ProtocolError(
            f"answered {media or 'no content type'} to a "
            f"{'streaming' if stream else 'non-streaming'} request (wanted {wanted})"
        )


def _usage_tokens(where: str, owner: dict[str, Any]) -> int | None:
    usage = owner.get("usage")
    if usage is None:
        return None
    if not isinstance(usage, dict):
        raise ProtocolError(f"{where} usage is {_show(usage)}, not an object")
    tokens = usage.get("completion_tokens")
    if tokens is not None and (not isinstance(tokens, int) or isinstance(tokens, bool)):
        raise ProtocolError(f"{where} usage.completion_tokens is {_show(tokens)}")
    return tokens


def chunk_content(data: str) -> tuple[str, int | None, str | None]:
    """(text, completion tokens, error message) of one stream event's data.

    Raises:
        ProtocolError: not JSON, or a field of the wrong type.
    """
    try:
        chunk = json.loads(data)
    except ValueError:
        raise ProtocolError(f"a stream event is not JSON: {_show(data)}") from None
    if not isinstance(chunk, dict):
        raise ProtocolError(f"a stream event is {_show(chunk)}, not an object")
    if "error" in chunk:
        error = chunk["error"]
        message = error.get("message") if isinstance(error, dict) else error
        return "", None, str(message)
    tokens = _usage_tokens("a stream event's", chunk)
    choices = chunk.get("choices")
    if choices is None:
        choices = []
    if not isinstance(choices, list):
        raise ProtocolError(f"choices is {_show(choices)}, not a list")
    text = ""
    for n, choice in enumerate(choices):
        if not isinstance(choice, dict):
            raise ProtocolError(f"choices[{n}] is {_show(choice)}, not an object")
        delta = choice.get("delta")
        if delta is None:
            continue
        if not isinstance(delta, dict):
            raise ProtocolError(f"choices[{n}].delta is {_show(delta)}, not an object")
        content = delta.get("content")
        if content is not None and not isinstance(content, str):
            raise ProtocolError(f"choices[{n}].delta.content is {_show(content)}, not text")
        text += content or ""
    return text, tokens, None


def body_content(payload: Any) -> tuple[str, int | None]:
    """(text, completion tokens) of a non-streamed answer.

    Raises:
        ProtocolError: a field missing or of the wrong type, or no text at all.
    """
    if not isinstance(payload, dict):
        raise ProtocolError(f"the body is {_show(payload)}, not an object")
    tokens = _usage_tokens("the body's", payload)
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices:
        raise ProtocolError(f"choices is {_show(choices)}, not a list with an answer")
    first = choices[0]
    if not isinstance(first, dict) or not isinstance(first.get("message"), dict):
        raise ProtocolError(f"choices[0] is {_show(first)}, not an object with a message")
    content = first["message"].get("content")
    if not isinstance(content, str):
        raise ProtocolError(f"choices[0].message.content is {_show(content)}, not text")
    if not content:
        raise ProtocolError("the answer holds no token")
    return content, tokens
