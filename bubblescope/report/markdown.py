"""The Markdown report (for CI summaries): a run, an ablation or a bare trace, section by section.

The rows come from run_rows.py, ablation_rows.py, trace_rows.py and reads_and_gaps_rows.py, which html.py
renders too, so both formats always show the same numbers. Escaping happens here through `md_cell`
(report/escape.py via cells.py). Nothing here imports plotly or torch.
"""

from __future__ import annotations

from typing import Any

from bubblescope.report.ablation_bandwidth import families_markdown
from bubblescope.report.ablation_cells import removed_idle_note
from bubblescope.report.ablation_rows import (
    ablation_summary_items,
    ablation_title,
    config_key_with_role,
    config_rows,
    switch_rows,
    waterfall_noise_note,
)
from bubblescope.report.bandwidth_rows import bandwidth_markdown
from bubblescope.report.cells import fmt_at_resolution, fmt_range, md_cell, md_items, md_table, plain
from bubblescope.report.findings import FIX_FIRST_TITLE, fix_first, fix_first_caption, fix_first_rows
from bubblescope.report.kernel_overlap import kernel_overlap_note
from bubblescope.report.kernel_rows import kernel_rows
from bubblescope.report.load_inputs import conform_ablation, conform_analysis, conform_run
from bubblescope.report.predicted_rows import PREDICTED_NOTE, PREDICTED_TITLE, predicted_rows
from bubblescope.report.profile_sections import profile_markdown
from bubblescope.report.reads_and_gaps_rows import gap_rows, gaps_heading, gpu_measured_of, sync_rows
from bubblescope.report.run_rows import (
    INTERVAL_NOTE,
    environment_rows,
    findings_analysis,
    record_syncs,
    run_summary_items,
    run_title,
    switch_info_rows,
    tokens_per_step,
)
from bubblescope.report.tp_rows import ablation_tp_markdown, tp_markdown
from bubblescope.report.trace_rows import trace_summary_items, trace_title, trace_warnings
from bubblescope.report.views import views_markdown


def _md_warnings(warnings: list[Any] | None) -> list[str]:
    return [f"> ⚠ {md_cell(w)}" for w in warnings or []]


def fix_first_md(analysis: dict[str, Any] | None, per_step_tokens: float = 1.0) -> list[str]:
    """The fix-first heading and table of a Markdown report."""
    rows = fix_first_rows(fix_first(analysis, per_step_tokens))
    caption = fix_first_caption(analysis)
    return [f"### {FIX_FIRST_TITLE}", md_table(rows, "nothing to fix first")] + (
        [f"_{md_cell(caption)}_"] if caption else []
    )


def kernels_md(analysis: dict[str, Any] | None, limit: int = 20) -> list[str]:
    """The per-kernel heading and table (top `limit` by GPU time), nothing without kernels."""
    headers, rows = kernel_rows((analysis or {}).get("kernels"))
    if not rows:
        return []
    return [
        f"### Kernels by GPU time (top {min(limit, len(rows))} of {len(rows)})",
        *[f"_{md_cell(note)}_" for note in [kernel_overlap_note(analysis)] if note],
        md_table((headers, rows[:limit])),
        *bandwidth_markdown(analysis),
    ]


def run_markdown(
    record: dict[str, Any], analysis: dict[str, Any] | None, warnings: list[str] | None = None
) -> str:
    """Markdown for one RunRecord: headline numbers, blocking reads, top gaps, switches, environment."""
    record, analysis = conform_run(record), conform_analysis(analysis)
    note = (record.get("analysis") or {}).get("note")
    parts = [
        f"## Run: {md_cell(run_title(record))}",
        *_md_warnings(list(warnings or []) + ([note] if note else [])),
    ]
    parts += fix_first_md(findings_analysis(record, analysis), tokens_per_step(record))
    parts += [md_items(run_summary_items(record, analysis)), INTERVAL_NOTE, *tp_markdown(record)]
    parts += ["### Host-blocking reads"]
    parts.append(
        md_table(sync_rows(record_syncs(record, analysis), gpu_measured_of(record)), "no host-blocking reads")
    )
    parts += kernels_md(analysis)
    parts += views_markdown(analysis)
    if analysis and analysis.get("gaps_top"):
        gaps = analysis["gaps_top"]
        parts += [f"### {gaps_heading(gaps, 10)}", md_table(gap_rows(gaps, 10))]
    parts += ["### Switches", md_table(switch_info_rows(record), "no switches")]
    parts += ["### Environment", md_table(environment_rows(record.get("environment")), "not recorded")]
    return "\n\n".join(p for p in parts if p) + "\n"


def ablation_markdown(
    ablation: dict[str, Any],
    records: dict[str, dict[str, Any]],
    warnings: list[str] | None = None,
    analyses: dict[str, dict[str, Any]] | None = None,
) -> str:
    """Markdown for an ablation: attribution headline, per-switch ΔTPOT with intervals, waterfall, configs,
    and each configuration's kernel families where its analysis has them."""
    ablation, records = conform_ablation(ablation, records)
    analyses = {key: conform_analysis(value) or {} for key, value in (analyses or {}).items()}
    attribution = ablation.get("attribution") or {}
    parts = [f"## {md_cell(ablation_title(ablation))}"]
    parts += _md_warnings(warnings)
    base_record = records.get(config_key_with_role(ablation, "baseline") or "") or {}
    parts += fix_first_md(findings_analysis(base_record, None), tokens_per_step(base_record))
    parts += [md_items(ablation_summary_items(attribution)), INTERVAL_NOTE]
    parts += ["### Per-switch ΔTPOT (ms saved, est [lo, hi])"]
    switches = switch_rows(attribution.get("switches"), attribution.get("shapley_method"))
    parts.append(md_table(switches, "no per-switch attribution"))
    if idle_note := removed_idle_note(attribution.get("switches")):
        parts.append(f"_{md_cell(idle_note)}_")
    if attribution.get("predicted_vs_measured"):
        parts += [f"### {PREDICTED_TITLE}", f"_{md_cell(PREDICTED_NOTE)}_"]
        parts.append(md_table(predicted_rows(attribution["predicted_vs_measured"])))
    waterfall = [
        [
            plain(row.get("step")),
            fmt_at_resolution(row.get("tpot_ms"), row.get("lo"), row.get("hi"), "ms"),
            fmt_at_resolution(
                row.get("delta_ms"), row.get("delta_lo"), row.get("delta_hi"), "ms", signed=True
            )
            + waterfall_noise_note(row),
            fmt_range(row.get("lo"), row.get("hi")),
        ]
        for row in attribution.get("waterfall") or []
        if isinstance(row, dict)
    ]
    parts += [
        "### TPOT waterfall",
        md_table((["step", "TPOT", "Δ", "95% CI (ms)"], waterfall), "no waterfall"),
    ]
    parts += ["### Configurations", md_table(config_rows(ablation, records), "no configurations")]
    parts += families_markdown(ablation, analyses, config_key_with_role(ablation, "baseline"))
    parts += ablation_tp_markdown(ablation, records)
    parts += ["### Host-blocking reads (baseline)"]
    parts.append(
        md_table(
            sync_rows(record_syncs(base_record, None), gpu_measured_of(base_record)), "no host-blocking reads"
        )
    )
    return "\n\n".join(p for p in parts if p) + "\n"


def trace_markdown(analysis: dict[str, Any]) -> str:
    """Markdown for a bare trace's analysis: per-step numbers, blocking reads, largest gaps."""
    analysis = conform_analysis(analysis) or {}
    parts = [f"## Trace: {md_cell(trace_title(analysis))}", *_md_warnings(trace_warnings(analysis))]
    parts += fix_first_md(analysis)
    parts += [md_items(trace_summary_items(analysis)), "### Host-blocking reads"]
    parts.append(
        md_table(sync_rows(analysis.get("syncs"), gpu_measured_of(analysis)), "no host-blocking reads")
    )
    parts += kernels_md(analysis)
    parts += views_markdown(analysis)
    gaps = analysis.get("gaps_top") or []
    parts += [f"### {gaps_heading(gaps, 10)}", md_table(gap_rows(gaps, 10), "no idle gaps")]
    return "\n\n".join(p for p in parts if p) + "\n"


def render_inputs_markdown(inputs: list[Any]) -> str:
    """Markdown for everything `bubblescope report` was given (load_inputs.load_inputs output), in order."""
    from bubblescope.report.load_inputs import AblationInput, ProfileInput, RunInput, TraceInput

    sections = []
    for item in inputs:
        if isinstance(item, RunInput):
            sections.append(run_markdown(item.record, item.analysis, item.warnings))
        elif isinstance(item, AblationInput):
            sections.append(ablation_markdown(item.ablation, item.records, item.warnings, item.analyses))
        elif isinstance(item, TraceInput):
            sections.append(trace_markdown(item.analysis))
            profile = item if isinstance(item, ProfileInput) else None
            sections.append(
                profile_markdown(item.analysis, profile and profile.record, profile and profile.warnings)
            )
    return "\n".join(sections)
