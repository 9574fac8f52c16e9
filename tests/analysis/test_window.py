"""The compiled streaming window hands over what the Python reference hands over.

``Window`` in ``tracer/analysis/execution/_native.c`` must call ``attribute`` with the
same traces, the same spans (parts joined in order), the same
``seq`` and line ends, in the same order, and grow the same way, as
:class:`~tracer.analysis.execution.stream.Window`, for any sequence of lines: ids that
come back before and after their trace was handed over, empty parts, lines of many
traces, windows from one span to more than the input.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracer.analysis.execution import stream
from tracer.analysis.execution.lines import LAST_SLOT
from tracer.analysis.execution.lines import seq as seq_of
from tracer.analysis.execution.stream import Window

Compiled = stream._Window if stream._Window is not Window else None
needs_compiled = pytest.mark.skipif(Compiled is None, reason="the compiled window is not built")


def _run(kind, lines, window, largest, last_slot):
    """What ``attribute`` is called with, and the window after each line."""
    calls, sizes = [], []

    def attribute(tid, spans, seq, end):
        calls.append((tid, list(spans), seq, end))

    held = kind(window, largest, last_slot)
    offset = 0
    for traces in lines:
        end = offset + 10 + len(traces)
        held.take(traces, seq_of(3, offset, 0), end, attribute)
        sizes.append(held.window)
        offset = end
    held.rest(attribute)
    return calls, sizes


_line = st.dictionaries(
    st.sampled_from([f"t{i}" for i in range(12)]),
    st.lists(st.integers(0, 999), max_size=4),
    max_size=5,
)


@needs_compiled
@settings(max_examples=600, deadline=None)
@given(st.lists(_line, max_size=40), st.integers(1, 40), st.integers(1, 60), st.integers(0, 6))
def test_the_compiled_window_hands_over_what_the_reference_does(raw, window, largest, last):
    # each run gets its own lists (the window extends them), made alike
    def lines():
        return [
            {tid: [f"{tid}:{v}" for v in values] for tid, values in line.items()} for line in raw
        ]

    want = _run(Window, lines(), window, largest, last)
    got = _run(Compiled, lines(), window, largest, last)
    assert [c[0] for c in got[0]] == [c[0] for c in want[0]]  # the order first
    assert got == want


@needs_compiled
@pytest.mark.parametrize("compiled", [False, True])
def test_a_part_after_its_trace_was_handed_over_doubles_the_window(compiled):
    handed: list[tuple] = []

    def attribute(*call):
        handed.append(call)

    held = (Compiled if compiled else Window)(2, 8, LAST_SLOT)
    held.take({"a": ["a1", "a2"]}, 0, 10, attribute)
    held.take({"b": ["b1", "b2", "b3"]}, 1 << 12, 20, attribute)
    assert [c[0] for c in handed] == ["a"]  # three spans past a's last: handed over
    assert handed[0][2:] == (0, 10)
    held.take({"a": ["a3"], "c": ["c1"]}, 2 << 12, 30, attribute)
    assert held.window == 4  # a's late part: the window doubled
    held.rest(attribute)
    # the rest in the order they first appeared; a's late part its own trace, each seq
    # its line's with its order in the line
    assert [c[:3] for c in handed[1:]] == [
        ("b", ["b1", "b2", "b3"], 1 << 12),
        ("a", ["a3"], 2 << 12),
        ("c", ["c1"], (2 << 12) | 1),
    ]


@needs_compiled
def test_the_compiled_window_passes_on_what_attribute_raises_and_refuses_bad_input():
    held = Compiled(1, 1, LAST_SLOT)

    def boom(*_):
        raise KeyError("from attribute")

    held.take({"a": ["x"]}, 0, 1, boom)
    with pytest.raises(KeyError, match="from attribute"):
        held.take({"b": ["y", "z"]}, 1, 2, boom)
    with pytest.raises(TypeError):
        held.take({"c": ("a tuple",)}, 2, 3, boom)
    with pytest.raises(TypeError):
        held.take({"c": []}, 2, 3)
    for kind in (Window, Compiled):
        with pytest.raises(ValueError, match="positive"):
            kind(0, 5, LAST_SLOT)


@needs_compiled
@pytest.mark.parametrize("compiled", [False, True])
def test_traces_past_the_last_slot_of_a_line_share_its_seq(compiled):
    handed: list[tuple] = []
    held = (Compiled if compiled else Window)(100, 100, 2)
    held.take({f"t{i}": [i] for i in range(5)}, 7 << 12, 10, lambda *call: handed.append(call))
    held.rest(lambda *call: handed.append(call))
    assert [c[2] - (7 << 12) for c in handed] == [0, 1, 2, 2, 2]
