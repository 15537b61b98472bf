"""Every surface's escape of any string shows that string's visible text and adds no structure (issue 28).

Strings are drawn by hypothesis from all of Unicode plus fragments an attacker would use (table pipes,
line breaks, headings, `$…$` math, raw HTML, links, ESC/CSI/OSC sequences, bidi overrides, formulas).
Markdown is parsed with markdown-it-py (CommonMark + GFM tables), the same shape a benign cell gives;
terminal output is rendered by rich with and without forced colour; CSV goes through the csv module.
"""

from __future__ import annotations

import csv
import html
import io
import re
from html.parser import HTMLParser

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from rich.console import Console

from bubblescope.report.escape import (
    console_text,
    csv_cell,
    html_text,
    md_text,
    plain_console_text,
    visible_controls,
)

FRAGMENTS = [
    "|",
    "\n",
    "\r\n",
    "\u2028",
    "# ",
    "## h",
    "$x$",
    "$$y$$",
    "<img src=x onerror=alert(1)>",
    "</td>",
    "`",
    "```",
    "[a](http://e.com)",
    "![i](x.png)",
    "*em*",
    "__s__",
    "~~d~~",
    "www.e.com",
    "x@e.com",
    "http://e.com",
    "&amp;",
    "&#x41;",
    "\\",
    "\x1b[2J",
    "\x1b]0;title\x07",
    "\x9b31m",
    "\x00",
    "\x7f",
    "\u202e",
    "\u2066",
    "\u200f",
    "[bold]",
    "[/x]",
    "=1+1",
    "+1",
    "-1",
    "@SUM(A1)",
    "\t",
    "\r",
    "- item",
    "1. item",
    "> quote",
    "---",
    "===",
    ":smile:",
    "\ud800",
]
hostile_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=8).map("".join)
PARSER = MarkdownIt("commonmark").enable(["table", "strikethrough"])
# What may be on a terminal line: no C0/C1 control (tab and newline aside), no bidi control.
TERMINAL_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
SGR = re.compile("\x1b\\[[0-9;]*m")
LINE_BREAKS = re.compile("[\t\n\r\v\f\u2028\u2029]+")


def _one_line(text: str) -> str:
    """What every one-line surface shows of `text`: line breaks as one space, controls visible."""
    return visible_controls(LINE_BREAKS.sub(" ", text))


def _md_table(cell: str) -> str:
    return f"## title {cell}\n\n| a | b |\n| --- | --- |\n| {cell} | x |\n"


def _shape_and_cell(markdown: str) -> tuple[list[str], str]:
    """Token types (text runs left out) and the text of the first body cell as a reader sees it."""
    shape, cells = [], []
    for token in PARSER.parse(markdown):
        shape.append(token.type)
        if token.type == "inline":
            shape += [c.type for c in token.children or [] if c.type not in ("text", "text_special")]
            cells.append("".join(c.content for c in token.children or []))
    return shape, cells[3] if len(cells) > 3 else ""


@settings(max_examples=300, deadline=None)
@given(hostile_text)
def test_markdown_cell_keeps_table_shape_and_text(text: str) -> None:
    escaped = md_text(text)
    shape, cell = _shape_and_cell(_md_table(escaped))
    benign_shape, _ = _shape_and_cell(_md_table("benign"))
    assert shape == benign_shape, (text, escaped)
    # The visible text survives (a table cell drops the whitespace around it).
    assert cell.strip() == _one_line(text).strip(), (text, escaped)
    # No `$` GitHub's math renderer could pair: every one is backslash-escaped.
    assert re.search(r"(?<!\\)\$", escaped.replace("\\\\", "")) is None, escaped


@settings(max_examples=200, deadline=None)
@given(hostile_text, st.booleans())
def test_terminal_text_shows_no_control_and_same_text(text: str, colour: bool) -> None:
    out = io.StringIO()
    system = "truecolor" if colour else None
    console = Console(file=out, width=10_000, force_terminal=colour, color_system=system)
    console.print(f"[bold]{console_text(text)}[/bold]", highlight=False, soft_wrap=True)
    shown = SGR.sub("", out.getvalue())
    assert TERMINAL_UNSAFE.search(shown) is None, repr(shown)
    assert shown.rstrip("\n") == _one_line(text), (text, shown)
    assert TERMINAL_UNSAFE.search(plain_console_text(text)) is None
    assert plain_console_text(text) == _one_line(text)


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)

    def handle_endtag(self, tag: str) -> None:
        self.tags.append("/" + tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@settings(max_examples=200, deadline=None)
@given(hostile_text)
def test_html_text_opens_no_tag_and_keeps_text(text: str) -> None:
    parser = _Tags()
    parser.feed(f'<td title="{html_text(text)}">{html_text(text)}</td>')
    parser.close()
    assert parser.tags == ["td", "/td"], text
    assert html.unescape(html_text(text)) == visible_controls(text)


@settings(max_examples=200, deadline=None)
@given(hostile_text)
def test_csv_cell_never_starts_a_formula_and_reads_back(text: str) -> None:
    buffer = io.StringIO()
    csv.writer(buffer).writerow([csv_cell(text), "next"])
    (row,) = list(csv.reader(io.StringIO(buffer.getvalue())))
    assert len(row) == 2 and row[1] == "next"
    assert not row[0].startswith(("=", "+", "-", "@", "\t", "\r")), row
    visible = visible_controls(text)
    assert row[0] in (visible, "'" + visible)


def test_csv_cell_keeps_numbers_and_quotes_formulas() -> None:
    assert csv_cell(-1.5) == -1.5 and csv_cell(3) == 3 and csv_cell(None) == ""
    assert csv_cell('=HYPERLINK("http://e.com")') == '\'=HYPERLINK("http://e.com")'
    assert csv_cell("-2+3") == "'-2+3" and csv_cell("@SUM(A1)") == "'@SUM(A1)"
    assert csv_cell("aten::mm") == "aten::mm"


def test_markdown_escapes_math_and_heading_marks() -> None:
    assert md_text("$x$ # h") == "\\$x\\$ \\# h"
