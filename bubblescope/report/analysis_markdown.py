"""Markdown view of a `bubblescope.analysis/1` dict (for CI summaries and pull requests).

Opens with what to fix first; every string from the trace is escaped by `md_cell` (report/escape.py),
so a hostile kernel name cannot add HTML, a link or a table row to a CI summary.
"""

from __future__ import annotations

from bubblescope.floor.trace_floor import floor_line
from bubblescope.report.bandwidth_rows import bandwidth_markdown
from bubblescope.report.cells import (
    READS_NOT_DETECTABLE,
    blame_text,
    fmt_duration_ns,
    fmt_measured_ns,
    md_cell,
    md_table,
    nothing_to_fix_text,
    reads_undetectable,
    steps_and_ranks,
)
from bubblescope.report.findings import FIX_FIRST_TITLE, fix_first, fix_first_caption, fix_first_rows
from bubblescope.report.kernel_overlap import kernel_overlap_note
from bubblescope.report.kernel_rows import kernel_rows
from bubblescope.report.views import views_markdown

GAP_CLASSES = ("sync", "host", "launch", "dependency", "outside")
TOP_GAPS_SHOWN = 10
TOP_KERNELS_SHOWN = 20


def _cell(text: object) -> str:
    return md_cell(text)


def fix_first_markdown(analysis: dict, tokens_per_step: float = 1.0) -> list[str]:
    """The fix-first section (heading and table) of any Markdown surface."""
    findings = fix_first(analysis, tokens_per_step)
    rows = fix_first_rows(findings)
    caption = fix_first_caption(analysis)
    lines = [f"### {FIX_FIRST_TITLE}", "", md_table(rows, nothing_to_fix_text(analysis)), ""]
    return lines + ([f"_{md_cell(caption)}_", ""] if caption else [])


def kernels_markdown(analysis: dict, limit: int = TOP_KERNELS_SHOWN) -> list[str]:
    """The per-kernel section (top `limit` by GPU time), empty when the analysis has no kernels."""
    headers, rows = kernel_rows(analysis.get("kernels"))
    if not rows:
        return []
    title = f"### Kernels by GPU time (top {min(limit, len(rows))} of {len(rows)})"
    note = kernel_overlap_note(analysis)
    lines = [title, ""] + ([f"_{md_cell(note)}_", ""] if note else [])
    return lines + [md_table((headers, rows[:limit])), "", *bandwidth_markdown(analysis)]


def render_analysis_markdown(analysis: dict, top: int | None = None) -> str:
    """The whole analysis as Markdown: fix-first, summary, idle by cause, devices, reads, kernels, gaps,
    then utilisation, kernel categories and host ops (report/views.py); `top` (--top) sets the rows of
    the kernel and gap tables."""
    summary = analysis["summary"]
    steps, ranks = steps_and_ranks(analysis)
    on_ranks = f" on each of {ranks} ranks" if ranks > 1 else ""
    lines = ["## bubblescope analyze", "", *fix_first_markdown(analysis)]
    lines += [
        f"- steps: **{steps}**{on_ranks} (from {_cell(analysis['step_source'])})",
        f"- blocking reads per step: {_cell(READS_NOT_DETECTABLE)}"
        if reads_undetectable(analysis)
        else f"- blocking reads per step: **{summary['blocking_reads_per_step']:g}**",
        f"- GPU busy per step: {fmt_duration_ns(summary['gpu_busy_ns_per_step'])}, "
        f"idle per step: {fmt_duration_ns(summary['idle_ns_per_step'])}"
        if analysis.get("gpu_measured", True)
        else "- GPU busy and idle per step: not measured (no GPU events)",
    ]
    lines.append(f"- {_cell(floor_line(analysis))}")
    lines += [f"- warning: {_cell(w)}" for w in analysis["warnings"]]
    by_class = summary["idle_by_class_ns_per_step"]
    lines += [
        "",
        "### GPU idle per step by cause",
        "",
        "| " + " | ".join(_cell(c) for c in by_class) + " |",
        "|" + "---:|" * len(by_class),
        "| " + " | ".join(fmt_measured_ns(v) for v in by_class.values()) + " |",
    ]
    lines += [
        "",
        "### Devices (whole trace)",
        "",
        "| rank | device | span | busy | idle | " + " | ".join(GAP_CLASSES) + " |",
        "|" + "---:|" * (5 + len(GAP_CLASSES)),
    ]
    for d in analysis["devices"]:
        cells = [_cell(d["rank"]), _cell(d["device"])]
        cells += [fmt_duration_ns(d[k]) for k in ("span_ns", "busy_ns", "idle_ns")]
        cells += [fmt_duration_ns(d["idle_by_class_ns"].get(c)) for c in GAP_CLASSES]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "### Host-blocking reads by site", ""]
    if analysis["syncs"]:
        lines += [
            "| # | site | op | count | per step | blocked | bubble | fix |",
            "|---:|---|---|---:|---:|---:|---:|---|",
        ]
        for i, s in enumerate(analysis["syncs"], start=1):
            lines.append(
                f"| {i} | {_cell(s['site'])} | {_cell(s['op'] or s['api'])} | {s['count']} | "
                f"{s['per_step']:g} | {fmt_measured_ns(s['blocked_ns'])} | "
                f"{fmt_measured_ns(s['bubble_ns'])} | "
                f"{_cell(s['hint'])} |"
            )
    else:
        lines.append("none found")
    lines += ["", *kernels_markdown(analysis, top or TOP_KERNELS_SHOWN)]
    lines += [
        "### Largest GPU idle gaps",
        "",
        "| rank | step | start | dur | class | blame |",
        "|---:|---:|---:|---:|---|---|",
    ]
    for g in analysis["gaps_top"][: top or TOP_GAPS_SHOWN]:
        lines.append(
            f"| {_cell(g['rank'])} | {_cell(g['step'])} | {fmt_duration_ns(g['start_ns'])} | "
            f"{fmt_duration_ns(g['dur_ns'])} | {_cell(g['class'])} | {_cell(blame_text(g['blame']))} |"
        )
    for part in views_markdown(analysis):
        lines += ["", part]
    return "\n".join(lines) + "\n"
