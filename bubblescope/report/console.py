"""The consoles and tables every command prints through: readable at 80 columns, in a pipe as in a TTY.

* `make_console`: rich's highlighter off (it coloured arbitrary numbers and paths in prose; colour is
  for gap classes and verdicts only), `NO_COLOR` respected (rich reads it), and a reader that closes
  the pipe (`bubblescope gate ... | head -1`) raises BrokenPipeError, which `bubblescope.cli.main`
  turns into a quiet exit 0 — rich's own handler exits 1, the gate's regression code. Piped, rich
  draws at $COLUMNS or 80 columns without colour: the same content as on a terminal.
* `print_rows`: plain-string rows as a table whose numbers are never cut (a numeric column is at
  least as wide as its widest cell; only text wraps, at spaces where it can, never at the no-break
  space between a number and its unit: `KeptText`). When even that does not
  fit the console, each row becomes a block of `header: value` lines, wrapped under an indent, so
  nothing is clipped at the right edge.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator, Sequence
from typing import IO, Any

from rich._wrap import divide_line
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, JustifyMethod, OverflowMethod
from rich.containers import Lines
from rich.measure import Measurement
from rich.table import Table
from rich.text import DEFAULT_JUSTIFY, DEFAULT_OVERFLOW, Text

from bubblescope.report.cells import NBSP, numeric_columns
from bubblescope.report.escape import console_text

# A column whose cells are all this short (numbers with units, counts, ranks) is never wrapped.
SHORT_CELL_CHARS = 14
# The narrowest a text column (names, sites, hints) is drawn before the table becomes blocks.
TEXT_COLUMN_MIN_CHARS = 16
# Indent of the `header: value` lines of a row drawn as a block.
BLOCK_INDENT = 4


class KeptText(Text):
    """Text that never wraps at a no-break space: a number and its unit (`1.43\u00a0ms`, cells.NBSP) stay
    on one line. rich counts U+00A0 as whitespace, so its wrapping split ranges into "1.43" / "ms"."""

    def wrap(
        self,
        console: Console,
        width: int,
        *,
        justify: JustifyMethod | None = None,
        overflow: OverflowMethod | None = None,
        tab_size: int = 8,
        no_wrap: bool | None = None,
    ) -> Lines:
        """rich's `Text.wrap` with one change: break offsets are those of the line with each no-break
        space read as a letter of the same width."""
        if NBSP not in self.plain or no_wrap or (no_wrap is None and self.no_wrap) or overflow == "ignore":
            return super().wrap(
                console, width, justify=justify, overflow=overflow, tab_size=tab_size, no_wrap=no_wrap
            )
        wrap_justify = justify or self.justify or DEFAULT_JUSTIFY
        wrap_overflow = overflow or self.overflow or DEFAULT_OVERFLOW
        lines = Lines()
        for line in self.split(allow_blank=True):
            if "\t" in line:
                line.expand_tabs(tab_size)
            offsets = divide_line(line.plain.replace(NBSP, "x"), width, fold=wrap_overflow == "fold")
            pieces = line.divide(offsets)
            for piece in pieces:
                piece.rstrip_end(width)
            pieces.justify(console, width, justify=wrap_justify, overflow=wrap_overflow)
            for piece in pieces:
                piece.truncate(width, overflow=wrap_overflow)
            lines.extend(pieces)
        return lines

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        lines = self.plain.splitlines()
        widest_line = max((cell_len(line) for line in lines), default=0)
        words = self.plain.replace(NBSP, "x").split()
        return Measurement(max((cell_len(word) for word in words), default=widest_line), widest_line)


class _Console(Console):
    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, "the reader closed the pipe")

    def render_str(self, text: str, **kwargs: Any) -> Text:
        """A string in a table cell (or any renderable) as KeptText: numbers and units never split."""
        return kept_text(super().render_str(text, **kwargs))

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """As rich's, except that a line of strings and Text holding a no-break space wraps as KeptText
        (rich joins the pieces of a line into a plain Text, which would wrap at it)."""
        if not objects or not all(isinstance(o, (str, Text)) for o in objects):
            super().print(*objects, **kwargs)
            return
        markup = {key: kwargs[key] for key in ("markup", "emoji", "highlight") if key in kwargs}
        pieces = [self.render_str(o, **markup) if isinstance(o, str) else o for o in objects]
        line = Text(kwargs.pop("sep", " ")).join(pieces)
        if NBSP not in line.plain:
            super().print(*objects, **kwargs)
            return
        line.end = kwargs.pop("end", "\n")
        super().print(_Rendered(kept_text(line)), **kwargs)


class _Rendered:
    """One renderable that rich passes on as it is (a Text given to `print` would be joined again)."""

    def __init__(self, text: Text) -> None:
        self._text = text

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        yield self._text

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return self._text.__rich_measure__(console, options)


def kept_text(text: Text) -> KeptText:
    """`text` (spans and settings kept) as a KeptText."""
    return KeptText(
        text.plain,
        style=text.style,
        justify=text.justify,
        overflow=text.overflow,
        no_wrap=text.no_wrap,
        end=text.end,
        tab_size=text.tab_size,
        spans=text.spans,
    )


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
            grid.add_row(f"{number_text}.", KeptText(cells[0][1]))
        for header, value in cells[1:]:
            if value:
                grid.add_row("", KeptText(f"{header}: {value}"))
        console.print(grid)
