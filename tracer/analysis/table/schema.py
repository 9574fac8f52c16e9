"""What one trace yields: the per-trace columns, each declared once.

A :class:`Column` says everything the code needs to know of one per-trace figure:

- how a :class:`~tracer.analysis.table._table.TraceTable` stores it: its array type
  (``code``, an :mod:`array` typecode, or ``"B"`` for a ``bytearray`` of flags) and
  its ``layout``: ``dense`` (a value every row), ``lazy`` (empty while every row has
  one value, the first row's, then filled with it up to the row that differs: the
  columns most traces leave at one value) or ``sparse`` (``{name: number}`` rows,
  :mod:`tracer.analysis.table._sparse`);
- what a row holds for None (``default``) and where a row's value comes from: a field
  of the trace's :class:`~tracer.analysis.model.breakdown.TraceBreakdown` (``source``:
  the field's name, ``""`` for the column's own), ``"row"`` (what the caller knows of
  the trace besides its breakdown: its place in the input, ``--split-by`` value and
  weight), or ``fill``: a function of the prepared trace
  (:class:`~tracer.analysis.model.prepare.PreparedTrace`) whose answer the trace's shape
  decides (see below);
- how it reads in :class:`~tracer.analysis.table._columns.Columns` (an attribute named
  ``name``);
- how the analysis reports it over the traces (``summary``: its key in
  :attr:`~tracer.analysis.aggregate.Analysis.summaries`, the
  :class:`~tracer.analysis.table.figures.Stats` of the rows that have a value) and how
  that reads to a person: ``label`` and ``short`` (the text report's and the HTML
  page's words), ``unit``, ``scale`` (stored units per reported unit) and ``fmt`` (the
  name of the number format the renderers apply).

The table's adding, merging and sorting, the workers' transfer of it, :class:`Columns`,
the batches, the aggregation and the renderers' summary lines loop over :data:`ROW`;
the what-if projection's columns are :data:`PROJECTED`, declared the same way.

**A new per-trace column** is its line in :data:`ROW` and, for a value the breakdown
does not hold yet, its ``fill`` function; with a ``summary`` and a ``label`` the
analysis reports it in the JSON (under :attr:`Column.key`) and the text, and with a
``short`` label and the end-to-end time's unit on the HTML page. A ``fill`` function
reads the trace's structure: its spans' names, services, kinds and attribute values,
the tree, the stages and hops, not its times. That is what a shape of the batches
(:mod:`tracer.analysis.attribution.shapes`) holds, so the batches take its answer once
per shape from the trace a shape is learned on: the attribute values a fill reads are
added to the shape's key, and a fill that reads a time leaves the shape to the
scalar path. A value that needs the times (a time of its own) is a breakdown field,
set by :func:`~tracer.analysis.model.breakdown.break_down` and by the batches' walks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from tracer.analysis.model.breakdown import model_calls

if TYPE_CHECKING:
    from tracer.analysis.model.prepare import PreparedTrace

__all__ = ["FILLED", "NONE", "PROJECTED", "ROW", "SUMMARIES", "Column", "by_name", "filled"]

#: None in an int column (times to first token and token counts are >= 0).
NONE = -1

Layout = Literal["dense", "lazy", "sparse"]


@dataclass(frozen=True, slots=True)
class Column:
    """One per-trace column; see the module docstring."""

    #: its field in :class:`~tracer.analysis.table._columns.Columns` (or
    #: :class:`~tracer.analysis.table._columns.ProjectedColumns`)
    name: str
    #: the array typecode it is stored in (``"B"``: a ``bytearray`` of 0/1 flags); a
    #: sparse column's values
    code: str
    layout: Layout = "dense"
    #: the stored value of None; for a column of ``strings`` None means that None is
    #: interned like a string
    default: int | float | None = NONE
    #: the value most rows of a lazy column have (None: its ``default``), which its
    #: ``absent`` rule compares with (a column of strings stays empty only while every
    #: row has it)
    usual: int | float | None = None
    #: where a row's value comes from: the breakdown's field of this name (``""``: the
    #: field ``name``), or ``"row"``: an argument of :meth:`TraceTable.add`
    source: str = ""
    #: the function of the prepared trace that gives its value (instead of a ``source``;
    #: its answer must follow from the trace's structure: see the module docstring)
    fill: Callable[[PreparedTrace], Any] | None = None
    #: an index into the table's interned strings
    strings: bool = False
    #: the breakdown field without which the value is None (a TTFT without its groups)
    requires: str = ""
    #: sparse: the table's interned names its keys index (``"group"`` or ``"hop"``)
    keys: str = ""
    #: the dtype :class:`Columns` gives it in (``""``: the stored one)
    dtype: str = ""
    #: how :class:`Columns` holds a lazy column: ``"full"`` (every row, the usual value
    #: where no row differed), ``"any"`` (None unless some row differs from the usual
    #: value) or ``"all"`` (None unless every row does)
    absent: Literal["full", "any", "all"] = "full"
    #: :meth:`TraceTable.columns` with ``release`` keeps it (what ``len`` and ``tally``
    #: read after the sort)
    kept: bool = False
    #: the key of its figures over the traces in
    #: :attr:`~tracer.analysis.aggregate.Analysis.summaries` (``""``: none of its own)
    summary: str = ""
    #: always in the JSON (null when no trace has it), else only when some trace has it
    always: bool = False
    label: str = ""
    #: the HTML page's label (``""``: not on the page)
    short: str = ""
    unit: str = ""
    #: stored units per reported unit (nanoseconds per millisecond)
    scale: float = 1.0
    #: the renderers' number format for it (``"ms"``)
    fmt: str = ""

    @property
    def lazy_value(self) -> int | float | None:
        """The usual value of a lazy column (a row left out of a batch has None)."""
        return self.default if self.usual is None else self.usual

    @property
    def from_breakdown(self) -> bool:
        """Whether its value is a field of the trace's breakdown."""
        return self.fill is None and self.source != "row"

    @property
    def attr(self) -> str:
        """Its attribute on a :class:`~tracer.analysis.table._table.TraceTable`."""
        return "_" + self.name

    @property
    def field(self) -> str:
        """The breakdown field (or :meth:`TraceTable.add` argument) it reads."""
        return self.source if self.source and self.source != "row" else self.name

    @property
    def key(self) -> str:
        """The JSON key of its figures over the traces: the summary and the unit
        (``e2e_ms``), or the summary alone for a column without a unit (a count)."""
        return f"{self.summary}_{self.unit}" if self.unit else self.summary


#: The columns of a trace's row, in the order the summaries are printed.
ROW: tuple[Column, ...] = (
    Column("start_ns", "q", default=0),
    Column(
        "e2e_ns",
        "q",
        default=0,
        summary="e2e",
        always=True,
        label="end-to-end",
        short="end-to-end",
        unit="ms",
        scale=1e6,
        fmt="ms",
    ),
    Column("span_count", "i", default=0, dtype="int64"),
    Column(
        "ttft_ns",
        "q",
        requires="ttft_groups",
        summary="ttft",
        always=True,
        label="time to first token, as the client sees it",
        short="time to first token (client)",
        unit="ms",
        scale=1e6,
        fmt="ms",
    ),
    Column(
        "coordinator_ttft_ns",
        "q",
        "lazy",
        summary="coordinator_ttft",
        label="time to first token at the prefill/decode coordinator",
        unit="ms",
        scale=1e6,
        fmt="ms",
    ),
    Column(
        "model_ttft_ns",
        "q",
        summary="model_ttft",
        always=True,
        label="time to first token inside the model server",
        short="time to first token (model server)",
        unit="ms",
        scale=1e6,
        fmt="ms",
    ),
    Column(
        "model_calls",
        "i",
        "lazy",
        usual=1,
        absent="any",
        fill=model_calls,
        summary="model_calls",
        label="model calls per request",
        fmt="count",
    ),
    Column("input_tokens", "q"),
    Column("output_tokens", "q"),
    Column("cached_tokens", "q", "lazy"),
    Column("model", "i", default=None, strings=True),
    Column("root_service", "i", strings=True),
    Column("root_name", "i", strings=True),
    Column("split", "i", "lazy", source="row", strings=True, absent="all", kept=True),
    Column("seq", "q", default=0, source="row", kept=True),
    Column("last_end", "q", default=0, source="row"),
    Column("weight", "d", "lazy", default=1.0, source="row", absent="any"),
    Column("weight_unknown", "B", "lazy", default=0, source="row", absent="any", dtype="bool"),
    Column("group_entries", "q", "sparse", source="groups", keys="group"),
    Column("ttft_entries", "q", "sparse", source="ttft_groups", keys="group"),
    Column("hop_entries", "q", "sparse", source="hops", keys="hop"),
)

#: The what-if projection's columns (:class:`~tracer.analysis.table._columns.Projected`, one
#: a row of a table attributed with a projection).
PROJECTED: tuple[Column, ...] = (
    Column("after_ns", "d", default=0.0),
    Column("ttft_before_ns", "q"),
    Column("ttft_after_ns", "d", default=0.0),
    Column("has_stage", "b", default=0, dtype="bool"),
    Column("before_groups", "q", "sparse", keys="group"),
    Column("after_groups", "d", "sparse", keys="group"),
)

#: The columns the analysis reports over the traces, in the order of the text report.
SUMMARIES: tuple[Column, ...] = tuple(c for c in ROW if c.summary)
#: The columns whose values a ``fill`` function gives, in :data:`ROW` order.
FILLED: tuple[Column, ...] = tuple(c for c in ROW if c.fill is not None)


def filled(trace: PreparedTrace) -> dict[str, Any]:
    """The values of the :data:`FILLED` columns for ``trace``, by name."""
    return {c.name: c.fill(trace) for c in FILLED}  # type: ignore[misc]


def by_name(name: str, columns: tuple[Column, ...] = ROW) -> Column:
    """The column ``name`` of ``columns``.

    Raises:
        KeyError: there is none.
    """
    for c in columns:
        if c.name == name:
            return c
    raise KeyError(name)
