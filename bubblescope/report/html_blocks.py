"""HTML sections every input kind shows: headline cards, warnings, fix-first, kernels, one-step timeline.

A run (html_run.py), an ablation (html_ablation.py) and a bare trace (html.py) each draw these the same
way, so they live once here. Rows come from the plain-text row builders that the Markdown report renders
too, so both formats show the same numbers.
"""

from __future__ import annotations

from typing import Any

from bubblescope.report import figures
from bubblescope.report.bandwidth_rows import BANDWIDTH_TITLE, bandwidth_rows, bandwidth_sentence
from bubblescope.report.cells import nothing_to_fix_text, num, plain
from bubblescope.report.findings import FIX_FIRST_TITLE, fix_first, fix_first_caption, fix_first_rows
from bubblescope.report.html_page import Page
from bubblescope.report.html_tables import esc, table_html
from bubblescope.report.kernel_overlap import kernel_overlap_note
from bubblescope.report.kernel_rows import kernel_rows, kernel_sort_keys
from bubblescope.report.rank_lanes import merged_timeline


def cards_html(items: list[tuple[str, str]]) -> str:
    cards = "".join(
        f'<div class="card"><div class="label">{esc(label)}</div><div class="value">{esc(value)}</div></div>'
        for label, value in items
    )
    return f'<div class="cards">{cards}</div>'


def warnings_html(warnings: list[Any] | None) -> str:
    return "".join(f'<p class="warn">{esc(w)}</p>' for w in warnings or [])


def fix_first_html(page: Page, analysis: dict[str, Any] | None, per_step_tokens: float = 1.0) -> None:
    """The fix-first section, first under each input's heading."""
    page.add(f"<h2>{esc(FIX_FIRST_TITLE)}</h2>")
    page.add(table_html(fix_first_rows(fix_first(analysis, per_step_tokens)), nothing_to_fix_text(analysis)))
    caption = fix_first_caption(analysis)
    if caption:
        page.add(f'<p class="sub">{esc(caption)}</p>')


def kernels_html(page: Page, analysis: dict[str, Any] | None) -> None:
    """The per-kernel table (sortable), when the analysis has kernels."""
    kernels = (analysis or {}).get("kernels") or []
    if not kernels:
        return
    page.add(f"<h2>Kernels by GPU time ({len(kernels)})</h2>")
    note = kernel_overlap_note(analysis)
    if note:
        page.add(f'<p class="sub">{esc(note)}</p>')
    rows = kernel_rows(kernels)
    # The short name in the cell, the full demangled name on hover (and in analysis.json).
    titles = {rows[0].index("kernel"): [plain(k.get("name")) for k in kernels if isinstance(k, dict)]}
    page.add(table_html(rows, titles=titles, sort_keys=kernel_sort_keys(kernels)))
    breakdown = bandwidth_rows(analysis)
    if breakdown[1]:
        page.add(f"<h2>{esc(BANDWIDTH_TITLE)}</h2>")
        page.add(f'<p class="sub">{esc(bandwidth_sentence(analysis))}</p>')
        page.add(table_html(breakdown))


def timeline_section(
    page: Page, analysis: dict[str, Any] | None, heading: str, profiled_over_timed: Any = None
) -> None:
    timeline = merged_timeline(analysis)
    page.add(f"<h2>{esc(heading)}</h2>")
    if num(profiled_over_timed) is not None:
        # The trace's steps ran under the profiler; say how far they describe the timed ones.
        page.add(
            f'<p class="sub">profiled step ÷ timed step: {num(profiled_over_timed):.2f}× '
            "(gaps and busy times describe the profiled steps, TPOT the timed ones)</p>"
        )
    if not isinstance(timeline, dict) or not timeline.get("slices"):
        # An analysed trace is not "no analysed trace": a profile page leaves its timeline out on purpose
        # (and says why), an analysis without steps has nothing to draw.
        if not analysis:
            why = ": the run has no analysed trace"
        else:
            why = " on this page" if analysis.get("steps") else ": the analysis found no step"
        page.add(f'<p class="muted">no timeline{why}</p>')
        return
    if timeline.get("truncated"):
        page.add('<p class="warn">timeline truncated: the step has more slices than the report draws</p>')
    if len(timeline.get("ranks") or []) > 1:
        page.add(
            '<p class="sub">every rank at the same step; each rank\'s lanes start at its own GPU interval '
            "(the ranks' trace clocks are not aligned)</p>"
        )
    page.figure(figures.timeline_figure(timeline))
