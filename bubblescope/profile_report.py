"""`report.html` of a profile session: the trace report, plus where each blocking read is called from.

The trace sections come from `bubblescope.report.html` (plotly). Without plotly the page keeps the
tables and says the timeline needs plotly (`bubblescope report OUT/analysis.json -o page.html` redraws it).
"""

from __future__ import annotations

from typing import Any

from bubblescope.report.escape import html_text

CHAIN_HEADERS = [
    "your line",
    "read at",
    "op",
    "per step",
    "count",
    "host blocked",
    "GPU bubble",
    "call chain",
]


def _us(value: Any) -> str:
    if value is None:
        # null: not measured (a CPU run; bubblescope.not_measured)
        return "not measured"
    return f"{value / 1000:.1f} µs" if isinstance(value, (int, float)) else "—"


def read_chain_rows(analysis: dict[str, Any]) -> list[list[str]]:
    """One row per syncs[] entry: user line, library line, counts, times and the caller chain."""
    rows = []
    for sync in analysis.get("syncs") or []:
        chain = " ← ".join(sync.get("stack") or []) or f"(trace {sync.get('line', 'def')} line only)"
        rows.append(
            [
                str(sync.get("site")),
                str(sync.get("read_at") or "—"),
                str(sync.get("op")),
                str(sync.get("per_step")),
                str(sync.get("count")),
                _us(sync.get("blocked_ns")),
                _us(sync.get("bubble_ns")),
                chain,
            ]
        )
    return rows


def _table(headers: list[str], rows: list[list[str]]) -> str:
    if not rows:
        return '<p class="muted">no host-blocking reads</p>'
    head = "".join(f"<th>{html_text(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html_text(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _chain_section(analysis: dict[str, Any]) -> str:
    sites = analysis.get("read_sites") or {}
    note = html_text(f"exact lines from the read tap; covered: {sites.get('covered', 'n/a')}")
    return f'<h2>Where each blocking read is called from</h2><p class="sub">{note}</p>' + _table(
        CHAIN_HEADERS, read_chain_rows(analysis)
    )


SMALL_PAGE_NOTE = (
    "The one-step timeline is left out of this page to keep it small (plotly is ~4.6 MB inlined): "
    "`bubblescope report analysis.json -o page.html` draws it."
)


def render_profile_html(analysis: dict[str, Any], *, timeline: bool = True) -> str:
    """The whole page for a profile session's analysis (with read_at/stack in its syncs).

    Args:
        analysis: analysis/1 from `bubblescope.profile_sites.analyze_with_read_sites`.
        timeline: draw the one-step timeline (inlines plotly.js). Default True.
    """
    try:
        from bubblescope.report.html import Page, add_trace_sections
    except ImportError:
        return _plain_page(analysis)
    page = Page("")
    if not timeline:
        analysis = {**analysis, "timeline": None}
        page.add(f'<p class="sub">{html_text(SMALL_PAGE_NOTE)}</p>')
    add_trace_sections(page, analysis)
    page.add(_chain_section(analysis))
    return page.render()


def _plain_page(analysis: dict[str, Any]) -> str:
    summary = analysis.get("summary") or {}
    items = "".join(f"<li>{html_text(k)}: {html_text(v)}</li>" for k, v in summary.items())
    warnings = "".join(f"<p>{html_text(w)}</p>" for w in analysis.get("warnings") or [])
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>bubblescope profile</title>'
        "</head><body><h1>bubblescope profile</h1>"
        "<p>plotly is not installed: no timeline; "
        "`bubblescope report analysis.json -o page.html` draws it.</p>"
        f"{warnings}<ul>{items}</ul>{_chain_section(analysis)}</body></html>\n"
    )
