"""The HTML sections of an ablation: attribution, per-switch ΔTPOT, configurations, the two timelines.

`bubblescope ablate` writes them as its report.html and `bubblescope report` adds them for each ablation
it is given (html.py); the numbers come from ablation_rows.py and run_rows.py, as in the Markdown report.
"""

from __future__ import annotations

from typing import Any

from bubblescope.report import figures
from bubblescope.report.ablation_bandwidth import families_html
from bubblescope.report.ablation_cells import removed_idle_note
from bubblescope.report.ablation_rows import (
    ablation_summary_items,
    ablation_title,
    config_key_with_role,
    config_rows,
    switch_rows,
)
from bubblescope.report.cells import num
from bubblescope.report.html_blocks import cards_html, fix_first_html, timeline_section, warnings_html
from bubblescope.report.html_page import Page
from bubblescope.report.html_tables import esc, table_html
from bubblescope.report.load_inputs import conform_ablation, conform_analysis
from bubblescope.report.predicted_rows import PREDICTED_NOTE, PREDICTED_TITLE, predicted_rows
from bubblescope.report.reads_and_gaps_rows import gpu_measured_of, sync_rows
from bubblescope.report.run_rows import (
    INTERVAL_NOTE,
    environment_rows,
    findings_analysis,
    floor_measured,
    floor_unmeasured_text,
    record_syncs,
    tokens_per_step,
    tpot_interval_ms,
)
from bubblescope.report.tp_rows import SECTION_TITLE, ablation_slowest_text, ablation_tp_rows


def add_ablation_sections(
    page: Page,
    ablation: dict[str, Any],
    records: dict[str, dict[str, Any]],
    analyses: dict[str, dict[str, Any]] | None = None,
    warnings: list[str] | None = None,
) -> None:
    """Append an ablation's sections: attribution, waterfall, per-switch ΔTPOT, configs, timelines."""
    ablation, records = conform_ablation(ablation, records)
    analyses = {k: conform_analysis(v) or {} for k, v in (analyses or {}).items()}
    attribution = ablation.get("attribution") or {}
    page.heading(ablation_title(ablation))
    page.add(
        f'<p class="sub">switches in order: {esc(ablation.get("order") or ablation.get("toggles"))} · '
        f"Shapley: {esc(attribution.get('shapley_method'))}</p>"
    )
    page.add(warnings_html(warnings))
    base_key = config_key_with_role(ablation, "baseline")
    base_record = records.get(base_key or "") or {}
    fix_first_html(
        page, findings_analysis(base_record, analyses.get(base_key or "")), tokens_per_step(base_record)
    )
    page.add(cards_html(ablation_summary_items(attribution)))
    page.add(f'<p class="sub">{esc(INTERVAL_NOTE.strip("_"))}</p>')
    if not attribution:
        page.add('<p class="warn">no attribution yet: the ablation has not finished</p>')
    if attribution.get("waterfall"):
        page.figure(figures.waterfall_figure(attribution["waterfall"]))
    page.add("<h2>Per-switch ΔTPOT and what it removed</h2>")
    if attribution.get("switches"):
        page.figure_or_note(
            figures.switch_deltas_figure(attribution["switches"], attribution.get("shapley_method")),
            "no switch's ΔTPOT is resolved: every interval holds zero or is wider than the effect "
            "(the table below has the estimates)",
        )
    page.add(
        table_html(
            switch_rows(attribution.get("switches"), attribution.get("shapley_method")),
            "no per-switch attribution",
        )
    )
    if idle_note := removed_idle_note(attribution.get("switches")):
        page.add(f'<p class="sub">{esc(idle_note)}</p>')
    if attribution.get("predicted_vs_measured"):
        page.add(f"<h2>{esc(PREDICTED_TITLE)}</h2>")
        page.add(f'<p class="sub">{esc(PREDICTED_NOTE)}</p>')
        page.add(table_html(predicted_rows(attribution["predicted_vs_measured"])))
    all_key = config_key_with_role(ablation, "all_on")
    _ablation_config_sections(page, ablation, records, base_key)
    page.add(families_html(ablation, analyses, base_key))
    for key, label in ((base_key, "baseline"), (all_key, "all switches on")):
        if key is not None and key in analyses:
            ratio = ((records.get(key) or {}).get("analysis") or {}).get("profiled_step_over_timed")
            timeline_section(page, analyses[key], f"One decode step: {label} ({key})", ratio)
    page.add("<h2>Host-blocking reads (baseline)</h2>")
    page.add(
        table_html(
            sync_rows(record_syncs(base_record, analyses.get(base_key or "")), gpu_measured_of(base_record)),
            "no host-blocking reads",
        )
    )
    page.add("<h2>Environment (baseline run)</h2>")
    page.add(table_html(environment_rows(base_record.get("environment")), "not recorded"))


def _ablation_config_sections(
    page: Page, ablation: dict[str, Any], records: dict[str, dict[str, Any]], base_key: str | None
) -> None:
    rows, idle_rows = [], []
    for config in ablation.get("configs") or []:
        record = records.get(str(config.get("key")))
        if not record:
            continue
        summary = record.get("summary") or {}
        ci = tpot_interval_ms(summary)
        # Each configuration has its own floor: bf16 router / lm_head switches read fewer bytes. An assumed
        # bandwidth (a CPU run) gives no floor at all.
        own_floor = (record.get("floor") or {}).get("floor_ms") if floor_measured(record) else None
        rows.append(
            {
                "label": config.get("key"),
                "tpot_ms": summary.get("tpot_ms"),
                "lo": ci[0],
                "hi": ci[1],
                "floor_ms": own_floor,
            }
        )
        stats = record.get("analysis") or {}
        if stats.get("idle_by_class_ns_per_step") and stats.get("gpu_measured") is not False:
            idle_rows.append(
                {"label": config.get("key"), "idle_by_class_ns_per_step": stats["idle_by_class_ns_per_step"]}
            )
    base_record = records.get(base_key or "") or {}
    floor_ms = (base_record.get("floor") or {}).get("floor_ms") if floor_measured(base_record) else None
    page.add("<h2>Speed of light per configuration</h2>")
    if rows and (floor_ms is not None or any(row["floor_ms"] is not None for row in rows)):
        page.figure(figures.speed_of_light_figure(rows, num(floor_ms)))
    elif rows:
        # Bars without a floor compare nothing with the speed of light; the table has every TPOT.
        page.add(f'<p class="muted">no floor: {esc(floor_unmeasured_text(base_record))}</p>')
    if idle_rows:
        page.figure_or_note(
            figures.idle_by_class_figure(idle_rows),
            "no GPU idle measured in any configuration (no GPU events in their traces)",
        )
    page.add(table_html(config_rows(ablation, records), "no configurations"))
    tp_rows = ablation_tp_rows(ablation, records)
    if tp_rows[1]:
        page.add(f"<h2>{esc(SECTION_TITLE)} per configuration</h2>")
        page.add(f'<p class="sub">{esc(ablation_slowest_text(ablation, records))}</p>')
        page.add(table_html(tp_rows))
