"""Escaping for every surface bubblescope writes: console (rich), terminal, Markdown, HTML, CSV, plotly.

Names of kernels, ops, frames, files and annotations come from traces, and traces are untrusted input
(colleagues' files, CI artifacts, public bug reports). Every string from a trace or record passes through
one of the functions here before it reaches a surface:

* `console_text`  rich markup (`[bold]`, `[/x]`) escaped, control characters made visible: an ESC, BEL
  or C1 sequence in a kernel name must not set the window title or clear the screen.
* `plain_console_text` the same for text printed without rich (`typer.echo`, one-line errors).
* `md_text`       one line of inline CommonMark/GFM text: raw HTML, backticks, emphasis, links, table
  pipes, `#`, GitHub's `$…$` math and line breaks all shown literally, so nothing pasted into
  `$GITHUB_STEP_SUMMARY` can open a tag, a heading, a formula, a new block or a new table row.
* `html_text`     text or attribute context of the HTML report.
* `csv_cell`      one CSV field: a text starting with `=`, `+`, `-`, `@`, tab or CR gets a leading `'`
  (OWASP's CSV-injection rule), so a spreadsheet shows it instead of evaluating it as a formula;
  numbers stay numbers. Quoting of `,`, `"` and line breaks is the `csv` module's job.
* `plot_text`     plotly's hover/label text (a small HTML subset), truncated: plotly copies a label into
  every point, so a 1 MB name would make the page a hundred times larger. Tables keep names whole.

Control characters are shown as `\\xNN` / `\\uNNNN` (visible, so a user can still tell two names apart);
lone surrogates (invalid in UTF-8) likewise. Nothing here imports plotly or torch.
"""

from __future__ import annotations

import html
import re
from typing import Any

from rich.markup import escape as _rich_escape

# C0 controls (tab and newline handled by each surface), DEL, C1 controls, lone surrogates, and the
# bidirectional overrides, isolates and marks that can reorder what a terminal or browser shows
# ("Trojan Source", CVE-2021-42574).
_CONTROL_RE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
# Everything that ends a line somewhere: Unicode's line and paragraph separators too.
_WHITESPACE_RE = re.compile("[\t\n\r\v\f\u2028\u2029]+")
# ASCII punctuation CommonMark/GFM interprets inside a line (code spans, emphasis, links and images,
# strikethrough, table cells; `@` for GFM's e-mail autolinks; `$` for GitHub's math; `#` in case a
# text ever starts a line). Line breaks become spaces, so no other block marker can start a line.
_MD_PUNCTUATION = set("\\`*_[]|~@$#")
# A CSV field starting with one of these is a formula to Excel, LibreOffice and Google Sheets (OWASP).
_CSV_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# GFM's bare-URL autolinks start at `www.` or `scheme://`; an escaped `.`/`:` there stops them.
_AUTOLINK_RE = re.compile(r"(www)\.|(:)(?=//)", re.IGNORECASE)
# Rich turns `:name:` into an emoji (`:smile:` is drawn as a face) in every string it prints, and has no
# escape for it; an empty style span after the first colon splits the code, and prints nothing.
_EMOJI_CODE_RE = re.compile(r":(?=[^\s:\[\]]+:)")
# A label in a figure shows this many characters (tables show the whole name).
PLOT_CHARS_SHOWN = 200


def as_text(value: Any) -> str:
    """Any value as a string (None as an empty string)."""
    return "" if value is None else str(value)


def visible_controls(text: str) -> str:
    """Replace control characters (and lone surrogates) with a visible `\\xNN`/`\\uNNNN` escape."""

    def _show(match: re.Match[str]) -> str:
        code = ord(match.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _CONTROL_RE.sub(_show, text)


def truncate(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, the cut marked with `…`."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def console_text(value: Any) -> str:
    """A string safe to print through rich: controls visible, markup and emoji codes shown literally, on
    one line."""
    text = visible_controls(_WHITESPACE_RE.sub(" ", as_text(value)))
    body = text.rstrip("\\")
    trailing = len(text) - len(body)
    escaped = _EMOJI_CODE_RE.sub(":[b][/b]", _rich_escape(body))
    if trailing:
        # Rich halves a run of backslashes before a tag, and a caller's `[/]` may follow this text:
        # doubled, then ended by an empty span of our own, the run prints as it is in every context.
        escaped += "\\" * (2 * trailing) + "[b][/b]"
    return escaped


def plain_console_text(value: Any) -> str:
    """A string safe to print without rich (typer.echo): controls visible, on one line."""
    return visible_controls(_WHITESPACE_RE.sub(" ", as_text(value)))


def md_text(value: Any) -> str:
    """One line of inline Markdown that renders as exactly `value`'s text.

    Line breaks become spaces (a newline would start a block or a table row); `&`, `<`, `>` become
    entities (no raw HTML, no autolink); CommonMark's punctuation is backslash-escaped (no code span,
    emphasis, link, table cell break, heading or list marker).
    """
    text = visible_controls(_WHITESPACE_RE.sub(" ", as_text(value)))
    out = []
    for char in text:
        if char == "&":
            out.append("&amp;")
        elif char == "<":
            out.append("&lt;")
        elif char == ">":
            out.append("&gt;")
        elif char in _MD_PUNCTUATION:
            out.append("\\" + char)
        else:
            out.append(char)
    return _AUTOLINK_RE.sub(lambda m: m.group(1) + "\\." if m.group(1) else "\\:", "".join(out))


def html_text(value: Any) -> str:
    """HTML text/attribute content: `& < > " '` escaped, controls visible."""
    return html.escape(visible_controls(as_text(value)), quote=True)


def plot_text(value: Any, limit: int = PLOT_CHARS_SHOWN) -> str:
    """A string for plotly text (hover, labels, legend): truncated, drawn literally.

    Plotly parses a small HTML subset and decodes only a few entities: `&lt;`, `&gt;` and `&amp;` are
    decoded, `&quot;` is not (it would show as `&quot;`), so quotes stay as they are (plotly never puts
    label text into an attribute).
    """
    return html.escape(truncate(visible_controls(as_text(value)), limit), quote=False)


def csv_cell(value: Any) -> Any:
    """One CSV field a spreadsheet shows as text: a string starting like a formula gets a leading `'`.

    Numbers (int, float, bool) are returned as they are, so a negative number stays a number; None is
    an empty field. Control characters other than tab and line breaks are made visible.
    """
    if value is None:
        return ""
    if isinstance(value, bool | int | float):
        return value
    text = visible_controls(as_text(value))
    return "'" + text if text.startswith(_CSV_FORMULA_START) else text
