"""The streaming window hands every part of every trace over once, in order, and grows
when a part arrives after its trace was handed over.

:class:`~tracer.analysis.execution.stream.Window` must call ``attribute`` with each
trace's parts joined in the order they came, each span exactly once, with its first
line's ``seq`` (with its order in the line) and its last line's end, for any sequence
of lines: ids that come back before and after their trace was handed over, empty parts,
lines of many traces, windows from one span to more than the input. Pure Python: these
run with or without a C compiler.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracer.analysis.execution.lines import LAST_SLOT
from tracer.analysis.execution.lines import seq as seq_of
from tracer.analysis.execution.stream import Window


def _run(lines, window, largest, last_slot):
    """What ``attribute`` is called with, and the window after each line."""
    calls, sizes = [], []

    def attribute(tid, spans, seq, end):
        calls.append((tid, list(spans), seq, end))

    held = Window(window, largest, last_slot)
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


@settings(max_examples=600, deadline=None)
@given(st.lists(_line, max_size=40), st.integers(1, 40), st.integers(1, 60), st.integers(0, 6))
def test_every_span_is_handed_over_once_with_its_parts_in_order(raw, window, largest, last):
    lines = [
        {tid: [f"{tid}:{n}:{v}" for v in values] for tid, values in line.items()}
        for n, line in enumerate(raw)
    ]
    sent = [s for line in lines for spans in line.values() for s in spans]  # (before: the
    calls, sizes = _run(lines, window, largest, last)  # window extends the first part's list)
    handed = [s for _, spans, _, _ in calls for s in spans]
    assert sorted(handed) == sorted(sent)  # each span once
    for tid, spans, _, _ in calls:
        assert all(s.startswith(f"{tid}:") for s in spans)
        # a trace's parts joined in the order of their lines
        assert [int(s.split(":")[1]) for s in spans] == sorted(int(s.split(":")[1]) for s in spans)
    # the window only grows, by doubling, up to the largest
    bounded = min(window, largest)
    for size in sizes:
        assert bounded <= size <= largest
        assert size == largest or (size // bounded) & (size // bounded - 1) == 0
    assert sizes == sorted(sizes)


def test_a_part_after_its_trace_was_handed_over_doubles_the_window():
    handed: list[tuple] = []

    def attribute(*call):
        handed.append(call)

    held = Window(2, 8, LAST_SLOT)
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


def test_what_attribute_raises_goes_up_and_a_window_is_positive():
    held = Window(1, 1, LAST_SLOT)

    def boom(*_):
        raise KeyError("from attribute")

    held.take({"a": ["x"]}, 0, 1, boom)
    with pytest.raises(KeyError, match="from attribute"):
        held.take({"b": ["y", "z"]}, 1, 2, boom)
    with pytest.raises(ValueError, match="positive"):
        Window(0, 5, LAST_SLOT)


def test_traces_past_the_last_slot_of_a_line_share_its_seq():
    handed: list[tuple] = []
    held = Window(100, 100, 2)
    held.take({f"t{i}": [i] for i in range(5)}, 7 << 12, 10, lambda *call: handed.append(call))
    held.rest(lambda *call: handed.append(call))
    assert [c[2] - (7 << 12) for c in handed] == [0, 1, 2, 2, 2]
