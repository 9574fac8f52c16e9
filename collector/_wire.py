"""Just enough of the protobuf wire format to take a request apart without parsing it.

Used when the protobuf parser refuses a whole request for one part (nesting too deep,
a string that is not UTF-8): the request is cut into its resource, scope and span
messages, and each is parsed alone.
"""

from __future__ import annotations

__all__ = ["WireError", "split_field"]


class WireError(ValueError):
    """The bytes are not a protobuf message."""


def split_field(message: bytes, number: int) -> tuple[bytes, list[bytes]]:
    """The payloads of length-delimited field ``number`` in ``message``, and the other
    fields as they were (tags and values, concatenated).

    Raises:
        WireError: ``message`` is not well-formed protobuf.
    """
    view = memoryview(message)
    end = len(message)
    pos = 0
    found: list[bytes] = []
    rest: list[bytes] = []
    while pos < end:
        start = pos
        tag, pos = _varint(view, pos, end)
        wire_type = tag & 7
        if wire_type == 0:
            _, pos = _varint(view, pos, end)
        elif wire_type == 1:
            pos += 8
        elif wire_type == 5:
            pos += 4
        elif wire_type == 2:
            length, pos = _varint(view, pos, end)
            if pos + length > end:
                raise WireError(f"a field of {length} bytes runs past the end of its message")
            if tag >> 3 == number:
                found.append(bytes(view[pos : pos + length]))
                pos += length
                continue
            pos += length
        else:
            raise WireError(f"wire type {wire_type} is not used by OTLP")
        if pos > end:
            raise WireError("a field runs past the end of its message")
        rest.append(bytes(view[start:pos]))
    return b"".join(rest), found


def _varint(view: memoryview, pos: int, end: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while pos < end and shift < 64:
        byte = view[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise WireError("a varint is truncated or longer than 10 bytes")
