"""What is read of every trace before it is attributed: its shape key and machine
words (what the batches read), and the span a split value comes from.

:func:`shape_words` and :func:`earliest_holder` are the references, in Python;
``_native.c`` reads the same in C where it is built (``HOPTRACE_NATIVE=off``: not used),
configured with the fields :data:`~tracer.analysis.attribution.shapes.FIELDS` names for
the key, the tree, the times and the weight, so that what is in the key is decided in
one place.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from itertools import repeat
from operator import attrgetter, contains, is_not
from typing import Any, cast

from tracer._compiled import enabled as compiled_parts_enabled
from tracer.analysis.attribution.shapes import FIELDS, MAX_SPANS
from tracer.spans.model import Span

__all__ = ["earliest", "earliest_holder", "shape_words", "words"]

_START, _END = attrgetter("start_ns"), attrgetter("end_ns")
_MARK = attrgetter("first_token_ns")
_SPAN_ID, _PARENT_ID = attrgetter("span_id"), attrgetter("parent_id")
#: The fields in the key by value (``shapes.FIELDS``).
_KEYED = [name for name, how in FIELDS.items() if how == "key"]
_STATIC = attrgetter(*_KEYED)
_ATTRIBUTES = attrgetter("attributes")
#: The fields only a trace's weight reads (``FIELDS``): when a span carries one, or the
#: root a sampler's attribute, the weight is worked out per trace, as the scalar path does.
_WEIGHT_NAMES = [name for name, how in FIELDS.items() if how == "weight"]
_WEIGHTED: Callable[[Span], Any] = (
    attrgetter(_WEIGHT_NAMES[0])
    if len(_WEIGHT_NAMES) == 1
    else lambda s: any(getattr(s, name) for name in _WEIGHT_NAMES)
)
_POSITIONS = range(MAX_SPANS)


def shape_words(spans: list[Span]) -> tuple[tuple, bytes | None, bytes, bool] | None:
    """What :meth:`ShapeBatcher.ticket` reads of every trace: its key (the parents'
    positions, -1 for none; the key fields of each span, ``FIELDS``; each span's
    attribute keys), its starts, ends and marks (0: none) as 3n int64 words (None: one
    past int64), which spans have a mark, and whether a span has a field only the weight
    reads. None: a duplicate span id. ``_native.c`` reads the same in C (the reference is
    this function: ``tests/analysis/test_words.py``)."""
    n = len(spans)
    # n <= MAX_SPANS: the positions outlast the ids
    index = dict(zip(map(_SPAN_ID, spans), _POSITIONS, strict=False))
    if len(index) != n:
        return None
    # A missing parent id (None) is not in the index either: -1, as for an orphan.
    parents = tuple(map(index.get, map(_PARENT_ID, spans), repeat(-1)))
    key = (parents, tuple(map(_STATIC, spans)), tuple(map(tuple, map(_ATTRIBUTES, spans))))
    marks = list(map(_MARK, spans))  # None where a span has no mark
    has = bytes(map(is_not, marks, repeat(None)))
    filled = [0 if m is None else m for m in marks]
    try:
        times: bytes | None = struct.pack(
            f"{3 * n}q", *map(_START, spans), *map(_END, spans), *filled
        )
    except struct.error:
        times = None
    return key, times, has, any(map(_WEIGHTED, spans))


def earliest_holder(spans: list[Span], attribute: str) -> Span | None:
    """The earliest span whose attributes hold ``attribute`` (of equal starts, the
    first), else None."""
    holds = list(map(contains, map(_ATTRIBUTES, spans), repeat(attribute)))
    if True not in holds:  # most traces, for most attributes: without a step a span
        return None
    best: Span | None = None
    for s, has in zip(spans, holds, strict=True):
        if has and (best is None or s.start_ns < best.start_ns):
            best = s
    return best


def _compiled() -> Any:
    """``_native.c``, configured with the fields ``FIELDS`` names, or None (not built, or
    ``HOPTRACE_NATIVE=off``)."""
    if not compiled_parts_enabled("words"):
        return None
    try:
        from tracer.analysis.attribution import _native
    except ImportError:
        return None
    _native.configure(
        Span,
        _KEYED,
        _WEIGHT_NAMES,
        "span_id",
        "parent_id",
        "attributes",
        "start_ns",
        "end_ns",
        "first_token_ns",
    )
    return _native


_built = _compiled()
_compiled_words = None if _built is None else _built.words
_compiled_earliest = None if _built is None else _built.earliest


def words(spans: list[Span]) -> tuple[tuple, bytes | None, bytes, bool] | None:
    """:func:`shape_words`, read in C where ``_native.c`` is built."""
    if _compiled_words is not None:
        got = _compiled_words(spans)
        if got is not NotImplemented:
            return cast(Any, got)
    return shape_words(spans)


def earliest(spans: list[Span], attribute: str) -> Span | None:
    """:func:`earliest_holder`, read in C where ``_native.c`` is built."""
    if _compiled_earliest is not None:
        got = _compiled_earliest(spans, attribute)
        if got is not NotImplemented:
            return cast(Any, got)
    return earliest_holder(spans, attribute)
