"""What one trace yields: the per-trace columns, each declared once.

A :class:`Column` says everything the code needs to know of one per-trace figure:

- how a :class:`~tracer.analysis.table._table.TraceTable` stores it: its array type
  (``code``, an :mod:`array` typecode, or ``"B"`` for a ``bytearray`` of flags) and
  its ``layout``: ``dense`` (a value every row), ``lazy`` (empty until a row differs
  from the ``default``, then filled with it up to that row: the columns most traces
  leave at their default) or ``sparse`` (``{name: number}`` rows,
  :mod:`tracer.analysis.table._sparse`);
- what a row holds for None (``default``) and where a row's value comes from
  (``source``: a field of the trace's :class:`~tracer.analysis.model.breakdown.TraceBreakdown`
  of that name, or ``"row"``: what the caller knows of the trace besides its breakdown,
  its place in the input, ``--split-by`` value and weight);
- how it reads in :class:`~tracer.analysis.table._columns.Columns` (``name`` is the field);
- how the analysis reports it over the traces (``summary``: the
  :class:`~tracer.analysis.aggregate.Analysis` field holding its
  :class:`~tracer.analysis.table.figures.Stats`) and how that reads to a person: ``label``
  and ``short`` (the text report's and the HTML page's words), ``unit``, ``scale``
  (stored units per reported unit) and ``fmt`` (the name of the number format the
  renderers apply).

The table's adding, merging and sorting, the workers' transfer of it, the batches and
the renderers' summary lines loop over :data:`ROW`; the what-if projection's columns
are :data:`PROJECTED`, declared the same way.

A new per-trace column is its line here, its field in
:class:`~tracer.analysis.table._columns.Columns`, and its value: a
:class:`~tracer.analysis.model.breakdown.TraceBreakdown` field that ``break_down`` sets, and
the same value in the batches' ``add_rows`` columns
(:mod:`tracer.analysis.attribution.batches`: one value for a whole shape, or one a
trace queued with it). With a ``summary``, its
:class:`~tracer.analysis.aggregate.Analysis` field; the analysis then reports it in
the JSON, the text and (in milliseconds, with a ``short`` label) the HTML page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["NONE", "PROJECTED", "ROW", "SUMMARIES", "Column", "by_name"]

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
    #: the stored value of None (and a lazy column's value until a row differs); for a
    #: column of ``strings`` None means that None is interned like a string
    default: int | float | None = NONE
    #: where a row's value comes from: the breakdown's field of this name (``""``: the
    #: field ``name``), or ``"row"``: an argument of :meth:`TraceTable.add`
    source: str = ""
    #: an index into the table's interned strings
    strings: bool = False
    #: the breakdown field without which the value is None (a TTFT without its groups)
    requires: str = ""
    #: sparse: the table's interned names its keys index (``"group"`` or ``"hop"``)
    keys: str = ""
    #: the dtype :class:`Columns` gives it in (``""``: the stored one)
    dtype: str = ""
    #: how :class:`Columns` holds a lazy column no row set: ``"full"`` (every row the
    #: default), ``"any"`` (None unless some row differs from the default) or ``"all"``
    #: (None unless every row does)
    absent: Literal["full", "any", "all"] = "full"
    #: :meth:`TraceTable.columns` with ``release`` keeps it (what ``len`` and ``tally``
    #: read after the sort)
    kept: bool = False
    #: the :class:`~tracer.analysis.aggregate.Analysis` field of its figures over the
    #: traces (``""``: none of its own)
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


def by_name(name: str, columns: tuple[Column, ...] = ROW) -> Column:
    """The column ``name`` of ``columns``.

    Raises:
        KeyError: there is none.
    """
    for c in columns:
        if c.name == name:
            return c
    raise KeyError(name)
