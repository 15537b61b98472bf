"""`report.html` of a profile session: the trace report plus the profile's own sections.

The trace sections come from `bubblescope.report.html` (plotly). Without plotly the page keeps the
tables and says the timeline needs plotly (`bubblescope report OUT -o page.html` redraws it).
"""

from __future__ import annotations

from typing import Any

from bubblescope.report.escape import html_text
from bubblescope.report.profile_sections import profile_sections_html

SMALL_PAGE_NOTE = (
    "The one-step timeline is left out of this page to keep it small (plotly is ~4.6 MB inlined): "
    "`bubblescope report OUT -o page.html` draws it."
)


def render_profile_html(
    analysis: dict[str, Any], record: dict[str, Any] | None = None, *, timeline: bool = True
) -> str:
    """The whole page for a profile session: what `bubblescope report OUT` renders for the folder.

    Args:
        analysis: analysis/1 from `bubblescope.profiling.read_sites.analyze_with_read_sites`.
        record: the session's `bubblescope.profile/1` record (for the timed TPOT). Default None.
        timeline: draw the one-step timeline (inlines plotly.js). Default True.
    """
    try:
        from bubblescope.report.html import add_trace_sections
        from bubblescope.report.html_page import Page
    except ImportError:
        return _plain_page(analysis, record)
    page = Page("")
    if not timeline:
        analysis = {**analysis, "timeline": None}
        page.add(f'<p class="sub">{html_text(SMALL_PAGE_NOTE)}</p>')
    add_trace_sections(page, analysis)
    page.add(profile_sections_html(analysis, record))
    return page.render()


def _plain_page(analysis: dict[str, Any], record: dict[str, Any] | None) -> str:
    summary = analysis.get("summary") or {}
    items = "".join(f"<li>{html_text(k)}: {html_text(v)}</li>" for k, v in summary.items())
    warnings = "".join(f"<p>{html_text(w)}</p>" for w in analysis.get("warnings") or [])
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>bubblescope profile</title>'
        "</head><body><h1>bubblescope profile</h1>"
        "<p>plotly is not installed: no timeline; "
        "`bubblescope report OUT -o page.html` draws it.</p>"
        f"{warnings}<ul>{items}</ul>{profile_sections_html(analysis, record)}</body></html>\n"
    )
