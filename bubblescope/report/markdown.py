"""Report content as plain-text rows, and the Markdown report (for CI summaries) built from them.

The `*_rows` functions turn contract dicts (docs/SCHEMAS.md) into (headers, rows) of plain strings; html.py
renders the same rows as HTML tables, so both formats always show the same numbers. Escaping happens at
render time through report/escape.py: `md_cell` here, `esc` there. Nothing here imports plotly or torch.
"""

from __future__ import annotations

from typing import Any

from bubblescope.analysis.timed_idle import timed_step_ns_of
from bubblescope.floor.trace_floor import floor_line
from bubblescope.report.ablation_bandwidth import families_markdown
from bubblescope.report.ablation_cells import (
    REMOVED_IDLE_HEADER,
    TIMED_IDLE_HEADER,
    removed_idle_note,
    removed_idle_text,
    timed_idle_text,
)
from bubblescope.report.bandwidth_rows import LAUNCH_PATH_HEADERS, bandwidth_markdown, launch_path_cells
from bubblescope.report.cells import (  # noqa: F401  (re-exported: html.py and tests use them here)
    ESTIMATORS,
    GAP_CLASSES,
    GAP_ROWS_SHOWN,
    NAME_CHARS_SHOWN,
    NBSP,
    READS_NOT_DETECTABLE,
    Rows,
    blame_text,
    fmt_at_resolution,
    fmt_bytes,
    fmt_delta_ms,
    fmt_duration_ms,
    fmt_duration_ns,
    fmt_estimate,
    fmt_interval,
    fmt_measured_ns,
    fmt_ms,
    fmt_number,
    fmt_range,
    interval_resolved,
    md_cell,
    md_items,
    md_table,
    num,
    plain,
    reads_undetectable,
    shorten,
    steps_and_ranks,
    tpot_noise_note,
)
from bubblescope.report.findings import FIX_FIRST_TITLE, fix_first, fix_first_caption, fix_first_rows
from bubblescope.report.kernel_overlap import kernel_overlap_note
from bubblescope.report.kernel_rows import kernel_rows
from bubblescope.report.load_inputs import conform_ablation, conform_analysis, conform_run
from bubblescope.report.predicted_rows import PREDICTED_NOTE, PREDICTED_TITLE, predicted_rows
from bubblescope.report.profile_sections import profile_markdown
from bubblescope.report.spec_rows import UNION_HEADER, expert_union_items, union_cells
from bubblescope.report.tp_rows import ablation_tp_markdown, tp_markdown
from bubblescope.report.views import utilization_text, views_markdown
from bubblescope.trace.kernel_names import short_kernel_name

# Said under every headline TPOT so a reader knows which interval every surface shows.
INTERVAL_NOTE = (
    "_Intervals: 95% CI from a two-level bootstrap (repeats, then steps within them); an estimate whose "
    "interval holds zero or is wider than the effect is marked not resolved (docs/intervals.md)._"
)


# What a CPU trace says of blocked time, bubbles and idle: nothing blocks there, so 0 would be a claim.
NOT_MEASURED_NO_GPU = "not measured (no GPU)"


def waterfall_noise_note(row: dict[str, Any]) -> str:
    """` (not resolved: noise)` after a waterfall step whose Δ interval holds zero or is wider than Δ."""
    delta = {"est": row.get("delta_ms"), "lo": row.get("delta_lo"), "hi": row.get("delta_hi")}
    if num(delta["lo"]) is None or num(delta["est"]) is None or interval_resolved(delta):
        return ""
    return " (not resolved: noise)"


def sync_rows(syncs: list[dict[str, Any]] | None, gpu_measured: bool = True) -> Rows:
    """Blocking-read table: one row per (site, op), worst first.

    Args:
        syncs: analysis `syncs[]` (or a record's).
        gpu_measured: False for a CPU trace: nothing blocked there, so its 0 ns of blocked time and
            bubble are shown as not measured, as the fix-first list and the cards do.
    """
    headers = [
        "site (source line)",
        "op",
        "api",
        "per step",
        "count",
        "host blocked",
        "GPU bubble",
        "fix hint",
    ]
    ordered = sorted(
        (s for s in syncs or [] if isinstance(s, dict)),
        key=lambda s: -(num(s.get("bubble_ns")) or num(s.get("per_step")) or 0.0),
    )
    rows = [
        [
            plain(s.get("site")),
            plain(s.get("op")),
            plain(s.get("api")),
            plain(s.get("per_step")),
            plain(s.get("count")),
            fmt_duration_ns(s.get("blocked_ns")) if gpu_measured else NOT_MEASURED_NO_GPU,
            fmt_duration_ns(s.get("bubble_ns")) if gpu_measured else NOT_MEASURED_NO_GPU,
            plain(s.get("hint")),
        ]
        for s in ordered
    ]
    return headers, rows


def gap_rows(gaps: list[dict[str, Any]] | None, limit: int = GAP_ROWS_SHOWN) -> Rows:
    """The `limit` largest GPU idle gaps, largest first, with their class and blame."""
    headers = ["step", "rank/device", "start", "idle", "class", "blame", "next op"]
    largest = sorted(
        (g for g in gaps or [] if isinstance(g, dict)), key=lambda g: -(num(g.get("dur_ns")) or 0.0)
    )
    rows = [
        [
            plain(g.get("step")),
            f"{plain(g.get('rank'))}/{plain(g.get('device'))}",
            fmt_duration_ns(g.get("start_ns")),
            fmt_duration_ns(g.get("dur_ns")),
            plain(g.get("class")),
            blame_text(g.get("blame")),
            short_kernel_name(plain(g.get("next_op"))) if g.get("next_op") else "—",
        ]
        for g in largest[:limit]
    ]
    return headers, rows


def gaps_heading(gaps: list[Any] | None, limit: int = GAP_ROWS_SHOWN) -> str:
    total = len(gaps or [])
    return (
        f"Largest GPU idle gaps ({min(total, limit)} of {total})"
        if total > limit
        else "Largest GPU idle gaps"
    )


def environment_rows(environment: dict[str, Any] | None) -> Rows:
    return ["key", "value"], [[str(k), plain(v)] for k, v in (environment or {}).items()]


def shown_estimators(shapley_method: Any = None) -> list[tuple[str, str]]:
    """The estimators a surface shows: Shapley from one sampled ordering *is* the cumulative order, so
    it is not shown as a separate estimate."""
    single_ordering = str(shapley_method or "").strip() == "sampled:1"
    return [(key, label) for key, label in ESTIMATORS if not (single_ordering and key == "shapley_ms")]


def switch_rows(switches: list[dict[str, Any]] | None, shapley_method: Any = None) -> Rows:
    """Per-switch attribution: each estimator `est [lo, hi]` in ms (two-level bootstrap 95% CI; marked
    `not resolved` when the interval holds zero or is wider than the effect), and what the switch removed
    *alone vs the baseline* (the same comparison as the `alone` column)."""
    estimators = shown_estimators(shapley_method)
    headers = ["switch"] + [label for _, label in estimators]
    headers += ["alone: removed reads/step", TIMED_IDLE_HEADER, REMOVED_IDLE_HEADER]
    rows = []
    for sw in switches or []:
        reads = sw.get("removed_reads_per_step") or {}
        rows.append(
            [plain(sw.get("name"))]
            + [fmt_interval(sw.get(key)) for key, _ in estimators]
            + [
                "; ".join(f"{site}: {plain(n)}" for site, n in reads.items()) or "—",
                timed_idle_text(sw),
                removed_idle_text(sw),
            ]
        )
    return headers, rows


def config_rows(ablation: dict[str, Any], records: dict[str, dict[str, Any]]) -> Rows:
    headers = ["config", "enabled", "roles", "status", "TPOT", "95% CI", "reads/step", "TPOT ÷ floor"]
    rows = []
    for config in ablation.get("configs") or []:
        record = records.get(str(config.get("key"))) or {}
        summary = record.get("summary") or {}
        lo_ms, hi_ms = tpot_interval_ms(summary)
        ci_text = fmt_range(lo_ms, hi_ms) + tpot_noise_note(summary.get("tpot_ms"), lo_ms, hi_ms)
        reads = (record.get("analysis") or {}).get("blocking_reads_per_step")
        ratio = (record.get("floor") or {}).get("tpot_over_floor")
        rows.append(
            [
                plain(config.get("key")),
                plain(config.get("enabled")),
                plain(config.get("roles")),
                plain(config.get("status")),
                fmt_at_resolution(summary.get("tpot_ms"), lo_ms, hi_ms, "ms"),
                ci_text,
                plain(reads),
                f"{ratio:.2f}×" if num(ratio) is not None and floor_measured(record) else "—",
            ]
        )
    # Launches and launch gap per step where the runs carry them (workloads that model kernel bytes).
    configs = ablation.get("configs") or []
    launches = launch_path_cells([records.get(str(c.get("key"))) or {} for c in configs])
    if launches is not None:
        headers += LAUNCH_PATH_HEADERS
        rows = [row + cells for row, cells in zip(rows, launches, strict=True)]
    # A speculative ablation: each configuration's expert union per verify.
    union = union_cells([records.get(str(c.get("key"))) or {} for c in configs])
    if union is not None:
        headers += [UNION_HEADER]
        rows = [row + cells for row, cells in zip(rows, union, strict=True)]
    return headers, rows


def run_summary_items(record: dict[str, Any], analysis: dict[str, Any] | None) -> list[tuple[str, str]]:
    """(label, value) headline numbers of a run."""
    summary = record.get("summary") or {}
    floor = record.get("floor") or {}
    lo_ms, hi_ms = tpot_interval_ms(summary)
    tpot_text = fmt_estimate(summary.get("tpot_ms"), lo_ms, hi_ms, "ms")
    tpot_text += tpot_noise_note(summary.get("tpot_ms"), lo_ms, hi_ms)
    stats = record.get("analysis") or (analysis or {}).get("summary") or {}
    ratio = num(floor.get("tpot_over_floor"))
    gpu_measured = stats.get("gpu_measured", (analysis or {}).get("gpu_measured")) is not False
    idle_text = fmt_duration_ns(stats.get("idle_ns_per_step")) if gpu_measured else NOT_MEASURED_NO_GPU
    measured = floor_measured(record)
    items = [
        ("TPOT (95% CI)", tpot_text),
        ("tokens/s", fmt_number(summary.get("tokens_per_s"), 1)),
        (
            "speed-of-light floor",
            fmt_ms(floor.get("floor_ms")) if measured or not floor else floor_unmeasured_text(record),
        ),
    ]
    # No measured floor, no ratio: a "TPOT ÷ floor —" card beside "floor: not measured" said nothing.
    items += [("TPOT ÷ floor", f"{ratio:.2f}×")] if ratio is not None and measured else []
    items += [
        ("blocking reads/step", plain(stats.get("blocking_reads_per_step"))),
        ("GPU idle/step", idle_text),
    ]
    profiled = num(stats.get("profiled_step_over_timed"))
    if profiled is not None:
        # How far the trace-derived numbers (gaps, reads) describe the timed steps.
        items.append(("profiled step ÷ timed step", f"{profiled:.2f}×"))
    return items + expert_union_items(record)


def floor_measured(record: dict[str, Any]) -> bool:
    """True when a run's floor means something: its bandwidth was given (--bandwidth) or measured on the
    CUDA device that ran. An assumed H200 bandwidth on a CPU run gives ratios like 258,279x floor."""
    floor = record.get("floor") or {}
    source = str(floor.get("bandwidth_source") or "")
    device = str((record.get("environment") or {}).get("device") or "")
    if num(floor.get("floor_ms")) is None:
        return False
    return source.startswith("given") or (source.startswith("measured") and device.startswith("cuda"))


def floor_unmeasured_text(record: dict[str, Any]) -> str:
    device = str((record.get("environment") or {}).get("device") or "")
    where = "on CPU" if not device.startswith("cuda") else "on this device"
    return f"not measured {where} (give --bandwidth)"


def floor_text(record: dict[str, Any]) -> str:
    """One line for consoles: the floor and TPOT ÷ floor, or why there is none."""
    floor = record.get("floor") or {}
    if not floor:
        return "floor: not recorded"
    if not floor_measured(record):
        return "floor: " + floor_unmeasured_text(record)
    return (
        f"floor {fmt_duration_ms(floor.get('floor_ms'))} ({fmt_bytes(floor.get('bytes_per_token'))}/token at "
        f"{plain(floor.get('bandwidth_gbps'))}{NBSP}GB/s, {plain(floor.get('bandwidth_source'))}) · "
        f"TPOT ÷ floor {num(floor.get('tpot_over_floor')) or 0:.2f}×"
    )


def gpu_measured_of(doc: dict[str, Any] | None) -> bool:
    """False only when a record's `analysis` block or an analysis/1 says the trace had no GPU timeline."""
    doc = doc or {}
    block = doc.get("analysis") if isinstance(doc.get("analysis"), dict) else doc
    return block.get("gpu_measured") is not False


def record_syncs(record: dict[str, Any], analysis: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A run's blocking reads: the record's own list first (on CPU it alone holds the readbacks it
    counted from the trace), else the full analysis's."""
    own = (record.get("analysis") or {}).get("syncs")
    if isinstance(own, list) and own:
        return own
    syncs = (analysis or {}).get("syncs")
    return syncs if isinstance(syncs, list) else []


def run_title(record: dict[str, Any]) -> str:
    workload = record.get("workload") or {}
    enabled = (record.get("switches") or {}).get("enabled") or []
    parts = [plain(workload.get("name"))]
    preset = record.get("preset") or workload.get("preset")
    if preset:
        parts.append(plain(preset))
    parts.append("switches: " + (plain(enabled) if enabled else "none"))
    return " · ".join(parts)


def config_key_with_role(ablation: dict[str, Any], role: str) -> str | None:
    configs = [c for c in ablation.get("configs") or [] if isinstance(c, dict)]
    for config in configs:
        if role in (config.get("roles") or []):
            return str(config.get("key"))
    want = set() if role == "baseline" else {plain(t) for t in ablation.get("toggles") or []}
    return next(
        (str(c.get("key")) for c in configs if {plain(e) for e in c.get("enabled") or []} == want), None
    )


def tpot_interval_ms(summary: dict[str, Any]) -> tuple[float | None, float | None]:
    """(lo, hi) of a RunRecord summary's TPOT interval, (None, None) when absent or malformed.

    The two-level interval (`tpot_ci95_two_level_ms`: repeats, then steps; what gate and ablate use)
    wherever the record has it, so one run shows one interval on every surface (docs/intervals.md).
    """
    for key in ("tpot_ci95_two_level_ms", "tpot_ci95_ms"):
        ci = summary.get(key)
        if isinstance(ci, list) and len(ci) == 2 and num(ci[0]) is not None and num(ci[1]) is not None:
            return num(ci[0]), num(ci[1])
    return None, None


def _yes_no(value: Any) -> str:
    return "yes" if value is True else "no" if value is False else plain(value)


def switch_info_rows(record: dict[str, Any]) -> Rows:
    """The switches a run's workload offers, and which were on."""
    switches = record.get("switches") or {}
    enabled = {plain(name) for name in switches.get("enabled") or []}
    rows = [
        [
            plain(s.get("name")),
            "on" if plain(s.get("name")) in enabled else "off",
            plain(s.get("help")),
            plain(s.get("replaces")),
            _yes_no(s.get("usable")),
        ]
        for s in switches.get("available") or []
        if isinstance(s, dict)
    ]
    return ["switch", "on", "help", "replaces", "usable"], rows


def device_rows(analysis: dict[str, Any]) -> Rows:
    """Per (rank, device) busy/idle totals of an analysis, idle split by gap class."""
    headers = ["rank", "device", "span", "busy", "idle", "kernels", "memcpys", "graph launches"]
    rows = []
    for dev in analysis.get("devices") or []:
        if not isinstance(dev, dict):
            continue
        idle_ns = dev.get("idle_by_class_ns") or {}
        rows.append(
            [plain(dev.get("rank")), plain(dev.get("device"))]
            + [fmt_duration_ns(dev.get(key)) for key in ("span_ns", "busy_ns", "idle_ns")]
            + [plain(dev.get(key)) for key in ("kernel_count", "memcpy_count", "graph_launches")]
            + [fmt_duration_ns(idle_ns.get(cls)) for cls in GAP_CLASSES]
        )
    return headers + [f"idle {cls}" for cls in GAP_CLASSES], rows


def trace_summary_items(analysis: dict[str, Any]) -> list[tuple[str, str]]:
    summary = analysis.get("summary") or {}
    steps, ranks = steps_and_ranks(analysis)
    items = [
        ("steps", str(steps) + (f" on each of {ranks} ranks" if ranks > 1 else "")),
        (
            "blocking reads/step",
            READS_NOT_DETECTABLE
            if reads_undetectable(analysis)
            else plain(summary.get("blocking_reads_per_step")),
        ),
        ("GPU busy/step", fmt_measured_ns(summary.get("gpu_busy_ns_per_step"))),
        ("GPU idle/step", fmt_measured_ns(summary.get("idle_ns_per_step"))),
    ]
    by_class = summary.get("idle_by_class_ns_per_step") or {}
    items += [(f"idle/step: {cls}", fmt_measured_ns(ns)) for cls, ns in by_class.items()]
    items += [("GPU utilisation", utilization_text(analysis))]
    return items + [("speed-of-light floor", floor_line(analysis))]


def ablation_summary_items(attribution: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        ("baseline TPOT", fmt_ms(attribution.get("baseline_tpot_ms"))),
        ("all-on TPOT", fmt_ms(attribution.get("all_on_tpot_ms"))),
        ("total saving ms [95% CI]", fmt_interval(attribution.get("total_saving_ms"))),
        ("interaction ms [95% CI]", fmt_interval(attribution.get("interaction_ms"))),
    ]


def ablation_title(ablation: dict[str, Any]) -> str:
    workload = ablation.get("workload") or {}
    preset = ablation.get("preset") or workload.get("preset")
    return f"Ablation: {plain(workload.get('name'))}" + (f" · {plain(preset)}" if preset else "")


def trace_warnings(analysis: dict[str, Any]) -> list[Any]:
    """The analysis's own warnings, plus one when the trace had no GPU activity to measure."""
    warnings = list(analysis.get("warnings") or [])
    if analysis.get("gpu_measured") is False:
        reads = (
            "blocking reads are not detectable without CUDA sync events"
            if reads_undetectable(analysis)
            else "blocking reads are counted from its runtime calls"
        )
        warnings.append(f"no GPU activity in the trace: GPU bubbles are not measured; {reads}")
    return warnings


def trace_title(analysis: dict[str, Any]) -> str:
    inputs = analysis.get("inputs") or []
    return ", ".join(plain(i.get("path")) for i in inputs if isinstance(i, dict)) or "trace"


# ---- Markdown ----


def _md_warnings(warnings: list[Any] | None) -> list[str]:
    return [f"> ⚠ {md_cell(w)}" for w in warnings or []]


def tokens_per_step(record: dict[str, Any]) -> float:
    """Mean tokens per timed step of a RunRecord (1 for plain decoding, the accept length for spec)."""
    summary = record.get("summary") or {}
    tokens, steps, repeats = (num(summary.get(k)) for k in ("tokens", "steps", "repeats"))
    if tokens and steps and repeats:
        return tokens / (steps * repeats)
    return 1.0


def findings_analysis(record: dict[str, Any], analysis: dict[str, Any] | None) -> dict[str, Any]:
    """What the fix-first list reads for a run: its analysis, with the record's own reads when the record
    holds them (on CPU only the record has the readbacks counted from the trace)."""
    merged = dict(analysis or {})
    merged["syncs"] = record_syncs(record, analysis)
    # The timed step bounds every saving (findings.fix_first, timed_idle.bound_idle).
    merged["timed_step_ns"] = timed_step_ns_of(record)
    if not analysis:
        block = record.get("analysis") or {}
        merged["gpu_measured"] = block.get("gpu_measured", False)
        merged["summary"] = {
            "idle_by_class_ns_per_step": block.get("idle_by_class_ns_per_step") or {},
            "gpu_busy_ns_per_step": block.get("gpu_busy_ns_per_step"),
        }
    return merged


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
