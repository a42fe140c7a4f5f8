"""Tables on stdout: boxed for a person at a terminal, tab-separated for a program.

A command's table is drawn with rich's boxes when stdout is a terminal, and written as
tab-separated values otherwise (piped into `cut`, `sort`, a file, a notebook), where boxes
wrapped at 80 columns are unreadable: a `# title` line, the header, one line per row, each
cell's plain text. `COBALT_TABLE_FORMAT` (`auto`, the default; `table`; `tsv`) chooses
either way whatever stdout is.

At a terminal, a cell that is one word (an id, a name, a number) is never cut short with
"…": its column is as wide as its longest such cell, and the columns with words to wrap
give way instead. A run's problem ids read `HumanEval/53` at 120 columns, not `HumanEva…`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from enum import StrEnum

from rich import box
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

__all__ = ["TABLE_FORMAT_VARIABLE", "TableFormat", "print_table", "table_format"]

TABLE_FORMAT_VARIABLE = "COBALT_TABLE_FORMAT"


class TableFormat(StrEnum):
    AUTO = "auto"
    TABLE = "table"
    TSV = "tsv"


def table_format() -> TableFormat:
    """COBALT_TABLE_FORMAT, with `auto` settled by whether stdout is a terminal (an
    unknown value reads as `auto`)."""
    raw = os.environ.get(TABLE_FORMAT_VARIABLE, "").strip().lower()
    chosen = TableFormat(raw) if raw in set(TableFormat) else TableFormat.AUTO
    if chosen is TableFormat.AUTO:
        return TableFormat.TABLE if sys.stdout.isatty() else TableFormat.TSV
    return chosen


def _plain(cell: RenderableType | None) -> str:
    if cell is None:
        return ""
    if isinstance(cell, Text):
        text = cell.plain
    elif isinstance(cell, str):
        text = cell  # the data as the command gave it, not rich's reading of it as markup
    else:
        text = str(cell)
    return " ".join(text.split())  # a tab or a newline would split the row


def _tsv_lines(table: Table) -> Iterable[str]:
    if table.title:
        yield f"# {_plain(table.title)}"
    columns = table.columns
    if table.show_header:
        yield "\t".join(_plain(column.header) for column in columns)
    cells = [list(column.cells) for column in columns]
    for row in range(table.row_count):
        yield "\t".join(_plain(column[row]) if row < len(column) else "" for column in cells)


def _words_whole(table: Table) -> None:
    """A column of one-word cells is never wrapped nor cut: rich then narrows the columns
    with words to wrap instead (it would otherwise shrink every column alike)."""
    for column in table.columns:
        cells = [_plain(cell) for cell in column.cells]
        if cells and all(" " not in cell for cell in cells):
            column.no_wrap = True
            column.min_width = max(column.min_width or 0, *(len(cell) for cell in cells))


def _boxed_width(table: Table) -> int:
    """The width a boxed table takes with its columns as narrow as their longest word
    (header or cell), with a margin: rich's own narrowing cuts one-word cells before
    that is reached."""
    words = [
        max(
            len(word)
            for text in (column.header, *column.cells)
            for word in [*_plain(text).split(), ""]
        )
        for column in table.columns
    ]
    return sum(words) + 3 * len(words) + 1 + len(words)


def _fit(table: Table, console: Console) -> None:
    """Drop the vertical rules and the outer edge where the boxed table cannot fit: each
    rule costs a column of characters that the cells need more. Every cell is folded
    rather than cut where even that is too narrow."""
    if _boxed_width(table) <= console.width:
        return
    table.box = box.SIMPLE_HEAD
    table.show_edge = False
    table.pad_edge = False
    table.collapse_padding = True
    for column in table.columns:
        column.overflow = "fold"


def print_table(table: Table, console: Console | None = None) -> None:
    """`table` on stdout in COBALT_TABLE_FORMAT's form (`table_format`)."""
    if table_format() is TableFormat.TSV:
        sys.stdout.write("".join(f"{line}\n" for line in _tsv_lines(table)))
        sys.stdout.flush()
        return
    console = console or Console()
    _words_whole(table)
    _fit(table, console)
    console.print(table)
