"""Text from traces and servers, made safe to print on a terminal.

Service and span names, attribute values and error answers come from whoever sent the
spans or runs the server. Printed as they are, control characters (ESC starts colour,
cursor and OSC-8 hyperlink sequences; CR and backspace overwrite what was printed; NUL
and BEL) and Unicode direction overrides would act on the terminal, and rich would read
``[...]`` as markup (``[/]`` ends the output in an error, ``GET /users/[id]`` loses its
``[id]``). :func:`printable` writes each such character as a visible escape
(``\\x1b``, ``\\u202e``); :func:`for_rich` also escapes rich markup.
"""

from __future__ import annotations

import re

from rich.markup import escape

__all__ = ["for_rich", "printable"]

# C0 controls but tab and newline, DEL, C1 controls, and the Unicode marks that turn
# text direction around or hide between characters (bidi overrides and isolates).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_UNSAFE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, *, one_line: bool = False) -> str:
    """``text`` with every control character written as a visible escape (``\\x1b``);
    with ``one_line``, newlines and tabs too."""
    value = text if isinstance(text, str) else str(text)
    pattern = _UNSAFE_LINE if one_line else _UNSAFE
    return pattern.sub(_shown, value) if pattern.search(value) else value


def for_rich(text: object, *, one_line: bool = False) -> str:
    """:func:`printable`, with rich markup escaped: for text that rich renders."""
    return escape(printable(text, one_line=one_line))
