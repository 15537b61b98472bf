"""The self-contained HTML report: one file, plotly.js inlined once, opens offline.

The entry points: a whole page for a run, an ablation, a bare trace, or everything `bubblescope report`
was given, plus a bare trace's sections. The page skeleton (and its escaping rules) is html_page.py; the
sections are html_blocks.py (shared), html_run.py and html_ablation.py. Table rows come from the same
row builders as the Markdown report (run_rows.py, ablation_rows.py, trace_rows.py, reads_and_gaps_rows.py),
so both formats show the same numbers.
"""

from __future__ import annotations

from typing import Any

from bubblescope.report.html_ablation import add_ablation_sections
from bubblescope.report.html_blocks import (
    cards_html,
    fix_first_html,
    kernels_html,
    timeline_section,
    warnings_html,
)
from bubblescope.report.html_page import Page
from bubblescope.report.html_run import add_run_sections
from bubblescope.report.html_tables import esc, table_html
from bubblescope.report.load_inputs import conform_analysis
from bubblescope.report.profile_sections import profile_sections_html
from bubblescope.report.reads_and_gaps_rows import gap_rows, gaps_heading, gpu_measured_of, sync_rows
from bubblescope.report.trace_rows import device_rows, trace_summary_items, trace_title, trace_warnings
from bubblescope.report.views_html import views_html


def add_trace_sections(page: Page, analysis: dict[str, Any]) -> None:
    """Append a bare trace's analysis: headline, timeline, blocking reads, gaps, devices."""
    analysis = conform_analysis(analysis) or {}
    page.heading(f"Trace: {trace_title(analysis)}")
    page.add(f'<p class="sub">steps from {esc(analysis.get("step_source"))}</p>')
    page.add(warnings_html(trace_warnings(analysis)))
    fix_first_html(page, analysis)
    page.add(cards_html(trace_summary_items(analysis)))
    timeline_section(page, analysis, "One decode step")
    page.add("<h2>Host-blocking reads</h2>")
    page.add(
        table_html(sync_rows(analysis.get("syncs"), gpu_measured_of(analysis)), "no host-blocking reads")
    )
    kernels_html(page, analysis)
    views_html(page, analysis)
    page.add(f"<h2>{esc(gaps_heading(analysis.get('gaps_top')))}</h2>")
    page.add(table_html(gap_rows(analysis.get("gaps_top")), "no idle gaps"))
    page.add("<h2>Devices</h2>")
    page.add(table_html(device_rows(analysis), "no GPU activity in the trace"))


def render_run_html(record: dict[str, Any], analysis: dict[str, Any] | None) -> str:
    """Whole HTML page for one RunRecord (`bubblescope.run/1`) and its optional analysis/1."""
    page = Page("")
    add_run_sections(page, record, analysis)
    return page.render()


def render_ablation_html(
    ablation: dict[str, Any],
    records: dict[str, dict[str, Any]],
    analyses: dict[str, dict[str, Any]] | None = None,
) -> str:
    """Whole HTML page for an ablation/1 document, its RunRecords and optional analyses by config key."""
    page = Page("")
    add_ablation_sections(page, ablation, records, analyses)
    return page.render()


def render_trace_html(analysis: dict[str, Any]) -> str:
    """Whole HTML page for a bare trace's analysis/1: timeline, blocking reads, gaps."""
    page = Page("")
    add_trace_sections(page, analysis)
    return page.render()


def render_inputs_html(inputs: list[Any]) -> str:
    """One page for everything `bubblescope report` was given (load_inputs.load_inputs output), in order."""
    from bubblescope.report.load_inputs import AblationInput, ProfileInput, RunInput, TraceInput

    page = Page("" if len(inputs) == 1 else "bubblescope report")
    for item in inputs:
        if isinstance(item, RunInput):
            add_run_sections(page, item.record, item.analysis, item.warnings)
        elif isinstance(item, AblationInput):
            add_ablation_sections(page, item.ablation, item.records, item.analyses, item.warnings)
        elif isinstance(item, TraceInput):
            add_trace_sections(page, item.analysis)
            # A profile's timed TPOT and, for any analysis made with the read tap, each read's call chain.
            profile = item if isinstance(item, ProfileInput) else None
            page.add(
                profile_sections_html(item.analysis, profile and profile.record, profile and profile.warnings)
            )
    return page.render()
