"""The HTML sections of one RunRecord: headline, speed of light, timeline, reads, kernels, gaps, switches.

`bubblescope run` writes them as its report.html and `bubblescope report` adds them for each run it is
given (html.py); the numbers come from run_rows.py, as in the Markdown report.
"""

from __future__ import annotations

import json
from typing import Any

from bubblescope.report import figures
from bubblescope.report.cells import NBSP, fmt_bytes, num
from bubblescope.report.html_blocks import (
    cards_html,
    fix_first_html,
    kernels_html,
    timeline_section,
    warnings_html,
)
from bubblescope.report.html_page import Page
from bubblescope.report.html_tables import esc, table_html
from bubblescope.report.load_inputs import conform_analysis, conform_run
from bubblescope.report.reads_and_gaps_rows import gap_rows, gaps_heading, gpu_measured_of, sync_rows
from bubblescope.report.run_rows import (
    INTERVAL_NOTE,
    environment_rows,
    findings_analysis,
    floor_measured,
    floor_unmeasured_text,
    record_syncs,
    run_summary_items,
    run_title,
    switch_info_rows,
    tokens_per_step,
    tpot_interval_ms,
)
from bubblescope.report.tp_rows import SECTION_TITLE, rank_rows, slowest_rank_text, tp_of, tp_summary_items
from bubblescope.report.views_html import views_html


def add_run_sections(
    page: Page, record: dict[str, Any], analysis: dict[str, Any] | None, warnings: list[str] | None = None
) -> None:
    """Append a RunRecord's sections: headline, floor, timeline, reads, gaps, switches, environment."""
    record, analysis = conform_run(record), conform_analysis(analysis)
    page.heading(f"Run: {run_title(record)}")
    page.add(
        f'<p class="sub">recorded {esc(record.get("created_utc"))} · '
        f"settings {esc(json.dumps(record.get('settings') or {}))}</p>"
    )
    page.add(
        warnings_html(
            list(warnings or [])
            + ([record["analysis"]["note"]] if (record.get("analysis") or {}).get("note") else [])
        )
    )
    fix_first_html(page, findings_analysis(record, analysis), tokens_per_step(record))
    page.add(cards_html(run_summary_items(record, analysis)))
    page.add(f'<p class="sub">{esc(INTERVAL_NOTE.strip("_"))}</p>')
    _tp_run_section(page, record)
    summary, floor = record.get("summary") or {}, record.get("floor") or {}
    page.add("<h2>Speed of light</h2>")
    if floor and not floor_measured(record):
        page.add(f'<p class="muted">floor: {esc(floor_unmeasured_text(record))}</p>')
    elif num(summary.get("tpot_ms")) is not None and floor:
        ci = tpot_interval_ms(summary)
        page.figure(
            figures.speed_of_light_figure(
                [{"label": "measured TPOT", "tpot_ms": summary["tpot_ms"], "lo": ci[0], "hi": ci[1]}],
                floor.get("floor_ms"),
            )
        )
        page.add(
            f'<p class="sub">{esc(fmt_bytes(floor.get("bytes_per_token")))} per token ÷ '
            f"{esc(floor.get('bandwidth_gbps'))}{NBSP}GB/s "
            f"({esc(floor.get('bandwidth_source'))})</p>"
        )
    else:
        page.add('<p class="muted">no floor recorded for this run</p>')
    timeline_section(
        page, analysis, "One decode step", (record.get("analysis") or {}).get("profiled_step_over_timed")
    )
    page.add("<h2>Host-blocking reads</h2>")
    page.add(
        table_html(
            sync_rows(record_syncs(record, analysis), gpu_measured_of(record)), "no host-blocking reads"
        )
    )
    kernels_html(page, analysis)
    views_html(page, analysis)
    if analysis and analysis.get("gaps_top"):
        page.add(f"<h2>{esc(gaps_heading(analysis['gaps_top']))}</h2>")
        page.add(table_html(gap_rows(analysis["gaps_top"])))
    page.add("<h2>Switches</h2>")
    page.add(table_html(switch_info_rows(record), "no switches"))
    page.add("<h2>Environment</h2>")
    page.add(table_html(environment_rows(record.get("environment")), "not recorded"))


def _tp_run_section(page: Page, record: dict[str, Any]) -> None:
    """Per-rank table of a tensor-parallel run, and which rank is slowest and why."""
    tp = tp_of(record)
    if tp is None:
        return
    page.add(f"<h2>{esc(SECTION_TITLE)}</h2>")
    page.add(cards_html(tp_summary_items(tp)))
    page.add(f'<p class="sub">{esc(slowest_rank_text(tp))}</p>')
    page.add(table_html(rank_rows(tp)))
