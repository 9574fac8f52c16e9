"""Render :class:`Section` lists as rich tables (people) or Markdown (documents)."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from tracer.analysis.render.sections import Section

__all__ = ["to_markdown", "to_table"]


def _table(section: Section) -> Table:
    table = Table(title=section.title, title_justify="left", show_lines=False)
    for n, header in enumerate(section.headers):
        table.add_column(header, justify="left" if n == 0 else "right", no_wrap=n > 0)
    for row in section.rows:
        table.add_row(*row)
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
        if table is not None:
            console.print(table)
        else:
            console.print(f"[bold]{section.title}[/bold]")
        for note in section.notes:
            console.print(f"  {note}", markup=False)
        console.print()
    return buffer.getvalue()


def to_markdown(sections: list[Section]) -> str:
    """GitHub-flavoured Markdown."""
    lines: list[str] = []
    for section in sections:
        lines.append(f"### {section.title}")
        lines.append("")
        if section.headers:
            lines.append("| " + " | ".join(section.headers) + " |")
            lines.append("|" + "|".join(["---"] + ["---:"] * (len(section.headers) - 1)) + "|")
            for row in section.rows:
                lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
            lines.append("")
        for note in section.notes:
            lines.append(f"- {note}")
        if section.notes:
            lines.append("")
    return "\n".join(lines)
