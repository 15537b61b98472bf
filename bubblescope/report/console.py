"""The consoles and tables every command prints through: readable at 80 columns, in a pipe as in a TTY.

* `make_console`: rich's highlighter off (it coloured arbitrary numbers and paths in prose; colour is
  for gap classes and verdicts only), `NO_COLOR` respected (rich reads it), and a reader that closes
  the pipe (`bubblescope gate ... | head -1`) raises BrokenPipeError, which `bubblescope.cli.main`
  turns into a quiet exit 0 — rich's own handler exits 1, the gate's regression code. Piped, rich
  draws at $COLUMNS or 80 columns without colour: the same content as on a terminal.
* `print_rows`: plain-string rows as a table whose numbers are never cut (a numeric column is at
  least as wide as its widest cell; only text wraps, at spaces where it can). When even that does not
  fit the console, each row becomes a block of `header: value` lines, wrapped under an indent, so
  nothing is clipped at the right edge.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence
from typing import IO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from bubblescope.report.cells import numeric_columns
from bubblescope.report.escape import console_text

# A column whose cells are all this short (numbers with units, counts, ranks) is never wrapped.
SHORT_CELL_CHARS = 14
# The narrowest a text column (names, sites, hints) is drawn before the table becomes blocks.
TEXT_COLUMN_MIN_CHARS = 16
# Indent of the `header: value` lines of a row drawn as a block.
BLOCK_INDENT = 4


class _Console(Console):
    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, "the reader closed the pipe")


def make_console(*, stderr: bool = False, file: IO[str] | None = None, width: int | None = None) -> Console:
    """A rich Console for command output (stdout; `stderr=True` for progress and warnings)."""
    return _Console(stderr=stderr, file=file, width=width, highlight=False)


def _is_short(cells: Sequence[str]) -> bool:
    return all(len(cell) <= SHORT_CELL_CHARS for cell in cells)


def table_min_width(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> int:
    """Columns a rich table of these rows needs so that no short cell is cut (heavy box, padding 1)."""
    width = 1
    for index, header in enumerate(headers):
        cells = [str(row[index]) for row in rows]
        if _is_short(cells):
            content = max([len(cell) for cell in cells] + [min(len(header), SHORT_CELL_CHARS)])
        else:
            content = TEXT_COLUMN_MIN_CHARS
        width += content + 3
    return width


def print_rows(
    console: Console,
    title: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right_aligned: Sequence[str] | None = None,
) -> None:
    """Rows of plain strings (escaped here) as a table, or as blocks when the table cannot fit.

    Args:
        title: shown above; headers: one per column; rows: cells as plain text (never markup).
        right_aligned: headers of columns to right-align; default: the columns whose every cell is a
            number (`cells.numeric_columns`).
    """
    if right_aligned is None:
        numeric = numeric_columns([[str(cell) for cell in row] for row in rows])
        right_aligned = [header for header, is_number in zip(headers, numeric, strict=False) if is_number]
    if table_min_width(headers, rows) > console.width:
        _print_blocks(console, title, headers, rows)
        return
    table = Table(title=console_text(title), title_justify="left")
    for index, header in enumerate(headers):
        cells = [str(row[index]) for row in rows]
        short = _is_short(cells)
        table.add_column(
            console_text(header),
            justify="right" if header in right_aligned else "left",
            overflow="fold",
            # Never narrower than its widest short cell: numbers are not cut. Headers may wrap.
            min_width=max((len(cell) for cell in cells), default=1) if short else TEXT_COLUMN_MIN_CHARS,
        )
    for row in rows:
        table.add_row(*(console_text(cell) for cell in row))
    console.print(table)


def _print_blocks(
    console: Console, title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]
) -> None:
    """Each row as `N. first cell` then one `header: value` line per other cell, wrapped under an indent."""
    console.print(Text(title, style="bold"))
    for number, row in enumerate(rows, start=1):
        cells = list(zip(headers, (str(cell) for cell in row), strict=True))
        # A leading "#" column is the row number itself.
        if cells and cells[0][0] == "#":
            number_text, cells = cells[0][1], cells[1:]
        else:
            number_text = str(number)
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True, min_width=BLOCK_INDENT - 1, justify="right")
        grid.add_column(overflow="fold")
        if cells:
            grid.add_row(f"{number_text}.", Text(cells[0][1]))
        for header, value in cells[1:]:
            if value:
                grid.add_row("", Text(f"{header}: {value}"))
        console.print(grid)
