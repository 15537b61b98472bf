"""An ablation's report content as plain text: per-switch attribution, configurations, headline items.

markdown.py, html_ablation.py, figures.py, the console and `bubblescope diff` read an ablation/1
(docs/SCHEMAS.md) through these, so each surface shows the same estimates and picks the same baseline.
"""

from __future__ import annotations

from typing import Any

from bubblescope.report.ablation_cells import (
    REMOVED_IDLE_HEADER,
    TIMED_IDLE_HEADER,
    removed_idle_text,
    timed_idle_text,
)
from bubblescope.report.bandwidth_rows import LAUNCH_PATH_HEADERS, launch_path_cells
from bubblescope.report.cells import (
    ESTIMATORS,
    Rows,
    fmt_at_resolution,
    fmt_interval,
    fmt_ms,
    fmt_range,
    interval_resolved,
    num,
    plain,
    tpot_noise_note,
)
from bubblescope.report.run_rows import floor_measured, tpot_interval_ms
from bubblescope.report.spec_rows import UNION_HEADER, union_cells


def ablation_title(ablation: dict[str, Any]) -> str:
    workload = ablation.get("workload") or {}
    preset = ablation.get("preset") or workload.get("preset")
    return f"Ablation: {plain(workload.get('name'))}" + (f" · {plain(preset)}" if preset else "")


def ablation_summary_items(attribution: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        ("baseline TPOT", fmt_ms(attribution.get("baseline_tpot_ms"))),
        ("all-on TPOT", fmt_ms(attribution.get("all_on_tpot_ms"))),
        ("total saving ms [95% CI]", fmt_interval(attribution.get("total_saving_ms"))),
        ("interaction ms [95% CI]", fmt_interval(attribution.get("interaction_ms"))),
    ]


def config_key_with_role(ablation: dict[str, Any], role: str) -> str | None:
    configs = [c for c in ablation.get("configs") or [] if isinstance(c, dict)]
    for config in configs:
        if role in (config.get("roles") or []):
            return str(config.get("key"))
    want = set() if role == "baseline" else {plain(t) for t in ablation.get("toggles") or []}
    return next(
        (str(c.get("key")) for c in configs if {plain(e) for e in c.get("enabled") or []} == want), None
    )


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


def waterfall_noise_note(row: dict[str, Any]) -> str:
    """` (not resolved: noise)` after a waterfall step whose Δ interval holds zero or is wider than Δ."""
    delta = {"est": row.get("delta_ms"), "lo": row.get("delta_lo"), "hi": row.get("delta_hi")}
    if num(delta["lo"]) is None or num(delta["est"]) is None or interval_resolved(delta):
        return ""
    return " (not resolved: noise)"


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
