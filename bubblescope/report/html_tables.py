"""HTML tables of the report: numeric columns right-aligned in tabular figures and never wrapped,
text columns wrapped only between words, columns with nothing in them left out, and an optional
`title` per cell (the full kernel name behind its short name).

Numeric cells and columns: `cells.numeric_columns`. Plain strings in (report/cells.py `Rows`), escaped
with `escape.html_text` here.
"""

from __future__ import annotations

from typing import Any

from bubblescope.report.cells import Rows, numeric_columns, plain, shown_columns
from bubblescope.report.escape import html_text

# A text cell this short with no space is a name or a token: it never wraps either.
SHORT_CELL_CHARS = 28
NUM_CLASS = ' class="num"'


def esc(value: Any) -> str:
    """HTML-escape anything for text or attribute context (control characters shown visibly)."""
    return html_text(plain(value))


def _td(cell: str, numeric: bool, title: str | None = None, sort_key: Any = None) -> str:
    if numeric:
        cls = NUM_CLASS
    elif len(cell) <= SHORT_CELL_CHARS and " " not in cell:
        cls = ' class="short"'
    else:
        cls = ""
    attrs = cls + (f' title="{esc(title)}"' if title and title != cell else "")
    attrs += f' data-sort="{esc(sort_key)}"' if sort_key is not None else ""
    return f"<td{attrs}>{esc(cell)}</td>"


def table_html(
    rows: Rows,
    empty: str = "none",
    titles: dict[int, list[str]] | None = None,
    sort_keys: list[list[Any]] | None = None,
) -> str:
    """A table of plain-string rows; columns that are `—` in every row are left out.

    Args:
        rows: (headers, body).
        empty: said instead of a table without rows.
        titles: column index -> hover text per row (e.g. full kernel names behind short ones).
        sort_keys: per row, the raw value of each column: the table sorts on a header click.
    """
    headers, body = rows
    if not body:
        return f'<p class="muted">{esc(empty)}</p>'
    keep = shown_columns(body, len(headers))
    numeric = numeric_columns(body)
    sort_hint = ' title="click to sort"' if sort_keys else ""
    head = "".join(f"<th{NUM_CLASS if numeric[i] else ''}{sort_hint}>{esc(headers[i])}</th>" for i in keep)
    lines = []
    for r, row in enumerate(body):
        cells = "".join(
            _td(
                row[i],
                numeric[i],
                (titles or {}).get(i, [None] * len(body))[r],
                sort_keys[r][i] if sort_keys else None,
            )
            for i in keep
        )
        lines.append(f"<tr>{cells}</tr>")
    sortable = ' class="sortable"' if sort_keys else ""
    # The wrapper scrolls a table wider than the page (many columns at 800 px) instead of the page.
    return (
        f'<div class="table-wrap"><table{sortable}><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(lines)}</tbody></table></div>"
    )


TABLE_CSS = """
.table-wrap{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;width:auto;max-width:100%;font-size:.88em;margin:8px 0}
th,td{border:1px solid #e3e3e3;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f3f5f8}td{overflow-wrap:break-word}td.short{white-space:nowrap}
th.num,td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
.card .value,.cards{font-variant-numeric:tabular-nums}
"""
