"""The views an engineer expects beside the gap analysis, as plain-string rows for console, HTML and
Markdown (CSV takes the raw fields: report/csv_tables.py):

- host ops, `key_averages`-style (analysis `host_ops[]`, bubblescope/analysis/host_ops.py): calls, self and
  total time, each per step;
- kernel time by category (`kernel_categories[]`, trace/kernel_names.py);
- GPU utilisation per step (`steps[].gpu_utilization`: GPU busy / the step's GPU interval).

`limit_views` applies `--top N` and `--min-gap` to an analysis before any surface renders it.
"""

from __future__ import annotations

from typing import Any

from bubblescope.report.cells import Rows, fmt_duration_ns, num, plain

HOST_OPS_TITLE = "Host ops by self time"
CATEGORIES_TITLE = "Kernel time by category"
UTILIZATION_TITLE = "GPU utilisation per step"
NOT_MEASURED_NO_GPU = "not measured (no GPU)"
# Steps the utilisation table lists (a window of hundreds of steps would bury the page).
UTILIZATION_ROWS = 20


def fmt_share(value: Any) -> str:
    number = num(value)
    return "—" if number is None else f"{number:.1%}"


def fmt_per_step(value: Any) -> str:
    """A count per step: whole when it is whole (`3`), else two decimals (`0.25`)."""
    number = num(value)
    if number is None:
        return "—"
    # Rounded first: 91.0000001 launches per step is 91.
    return f"{number:.0f}" if abs(number - round(number)) < 5e-3 else f"{number:.2f}"


def host_op_rows(host_ops: list[dict[str, Any]] | None) -> Rows:
    """One row per host op name, largest self time first (the analysis' order)."""
    headers = ["op", "kind", "calls", "calls/step", "self/step", "total/step", "self share", "self", "total"]
    rows = [
        [
            plain(op.get("name")),
            plain(op.get("kind")),
            plain(op.get("calls")),
            fmt_per_step(op.get("calls_per_step")),
            fmt_duration_ns(op.get("self_ns_per_step")),
            fmt_duration_ns(op.get("total_ns_per_step")),
            fmt_share(op.get("self_share")),
            fmt_duration_ns(op.get("self_ns")),
            fmt_duration_ns(op.get("total_ns")),
        ]
        for op in host_ops or []
        if isinstance(op, dict)
    ]
    return headers, rows


def kernel_category_rows(categories: list[dict[str, Any]] | None) -> Rows:
    headers = ["category", "kernels", "launches/step", "time/step", "share"]
    rows = [
        [
            plain(c.get("category")),
            plain(c.get("kernels")),
            fmt_per_step(c.get("count_per_step")),
            fmt_duration_ns(c.get("ns_per_step")),
            fmt_share(c.get("share")),
        ]
        for c in categories or []
        if isinstance(c, dict)
    ]
    return headers, rows


def utilization_heading(analysis: dict[str, Any]) -> str:
    total = len(analysis.get("steps") or [])
    shown = f" (first {UTILIZATION_ROWS} of {total})" if total > UTILIZATION_ROWS else ""
    text = utilization_text(analysis)
    over = "" if text == NOT_MEASURED_NO_GPU else " over the typical steps"
    return f"{UTILIZATION_TITLE}{shown}: {text}{over}"


def utilization_rows(analysis: dict[str, Any]) -> Rows:
    """Per step (and rank), the first UTILIZATION_ROWS: GPU interval, GPU busy time, busy ÷ interval."""
    headers = ["step", "rank", "GPU interval", "GPU busy", "utilisation"]
    measured = analysis.get("gpu_measured") is not False
    rows = []
    for step in (analysis.get("steps") or [])[:UTILIZATION_ROWS]:
        if not isinstance(step, dict):
            continue
        util = num(step.get("gpu_utilization"))
        rows.append(
            [
                plain(step.get("index")),
                plain(step.get("rank")),
                fmt_duration_ns(step.get("gpu_dur_ns")) if measured else NOT_MEASURED_NO_GPU,
                fmt_duration_ns(step.get("gpu_busy_ns")) if measured else NOT_MEASURED_NO_GPU,
                f"{util:.1%}" if measured and util is not None else NOT_MEASURED_NO_GPU,
            ]
        )
    return headers, rows


def utilization_text(analysis: dict[str, Any]) -> str:
    """`38.2%` (typical steps' GPU busy ÷ GPU interval), or why there is none."""
    util = num((analysis.get("summary") or {}).get("gpu_utilization"))
    if analysis.get("gpu_measured") is False or util is None:
        return NOT_MEASURED_NO_GPU
    return f"{util:.1%}"


def limit_views(
    analysis: dict[str, Any], top: int | None = None, min_gap_us: float | None = None
) -> dict[str, Any]:
    """A shallow copy of `analysis` whose tables hold at most `top` rows and whose gap list holds only
    gaps of at least `min_gap_us`; totals (devices, summary, idle by class) still count every gap.

    Args:
        analysis: a `bubblescope.analysis/1` dict.
        top: rows per table (kernels, host ops, blocking-read sites, gaps); None: as written. The
            step list stays whole (step counts come from it); its table shows UTILIZATION_ROWS.
        min_gap_us: drop listed gaps shorter than this (µs); None: keep all.
    """
    out = dict(analysis)
    if min_gap_us is not None:
        out["gaps_top"] = [
            g for g in analysis.get("gaps_top") or [] if (num(g.get("dur_ns")) or 0) >= min_gap_us * 1e3
        ]
    if top is not None:
        for key in ("kernels", "host_ops", "syncs", "gaps_top"):
            if isinstance(out.get(key), list):
                out[key] = out[key][:top]
    return out


def views_markdown(analysis: dict[str, Any] | None, heading: str = "###") -> list[str]:
    """The three views as Markdown sections (nothing for an analysis without steps)."""
    from bubblescope.report.cells import md_cell, md_table

    if not analysis or not analysis.get("steps"):
        return []
    parts = [f"{heading} {md_cell(utilization_heading(analysis))}"]
    if analysis.get("gpu_measured") is not False:
        parts.append(md_table(utilization_rows(analysis)))
    categories = kernel_category_rows(analysis.get("kernel_categories"))
    if categories[1]:
        parts += [f"{heading} {CATEGORIES_TITLE}", md_table(categories)]
    ops = host_op_rows(analysis.get("host_ops"))
    parts += [f"{heading} {HOST_OPS_TITLE} ({len(ops[1])})", md_table(ops, "no host ops inside the steps")]
    return parts
