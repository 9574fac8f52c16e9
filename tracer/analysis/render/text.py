"""Render :class:`Section` lists as rich tables (people) or Markdown (documents)."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from tracer._terminal import for_rich, printable
from tracer.analysis.render.sections import Section

__all__ = ["to_markdown", "to_table"]


def _table(section: Section) -> Table:
    # Every text is escaped: names come from the traces (see tracer._terminal).
    # The title is printed on its own line above (never wrapped to the table's width).
    table = Table(show_lines=False)
    for n, header in enumerate(section.headers):
        table.add_column(for_rich(header), justify="left" if n == 0 else "right", no_wrap=n > 0)
    for row in section.rows:
        table.add_row(*(for_rich(cell, one_line=True) for cell in row))
    return table


def to_table(sections: list[Section], width: int | None = None, color: bool | None = None) -> str:
    """Text with box-drawn tables, as printed on a terminal.

    The page is ``width`` columns (110 by default) or wider when a table needs it:
    numbers are never cut short.
    """
    tables = [_table(s) if s.headers else None for s in sections]
    probe = Console(file=io.StringIO(), width=1000)
    needed = max([probe.measure(t).maximum for t in tables if t is not None] + [width or 110])
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=needed,
        force_terminal=bool(color),
        no_color=not color,
        highlight=False,
        soft_wrap=False,
    )
    for section, table in zip(sections, tables, strict=True):
        # Titles and notes are never wrapped mid-phrase (a wrapped command would not
        # paste): a long line stays one line, and the terminal folds it if it must.
        console.print(f"[bold]{for_rich(section.title)}[/bold]", soft_wrap=True)
        if table is not None:
            console.print(table)
        for note in section.notes:
            console.print(f"  {printable(note)}", markup=False, soft_wrap=True)
        console.print()
    return buffer.getvalue()


def to_markdown(sections: list[Section]) -> str:
    """GitHub-flavoured Markdown (control characters in names written as escapes)."""
    lines: list[str] = []
    for section in sections:
        lines.append(f"### {printable(section.title, one_line=True)}")
        lines.append("")
        if section.headers:
            lines.append("| " + " | ".join(section.headers) + " |")
            lines.append("|" + "|".join(["---"] + ["---:"] * (len(section.headers) - 1)) + "|")
            for row in section.rows:
                cells = (printable(c, one_line=True).replace("|", "\\|") for c in row)
                lines.append("| " + " | ".join(cells) + " |")
            lines.append("")
        for note in section.notes:
            lines.append(f"- {printable(note, one_line=True)}")
        if section.notes:
            lines.append("")
    return "\n".join(lines)
