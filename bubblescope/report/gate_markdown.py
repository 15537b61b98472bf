"""The gate verdict as Markdown, for `$GITHUB_STEP_SUMMARY` (rendering only)."""

from __future__ import annotations

from typing import Any

from bubblescope.report.cells import fmt_change, fmt_duration_ms, fmt_percent, plain
from bubblescope.report.escape import md_text

CHANGE_MARKS = {"regression": "❌", "improvement": "🚀", "unresolved": "✅"}


def _md(text: object) -> str:
    """Escape what would break a table cell or inject markup (site names come from traces)."""
    return md_text(text)


def _reads_rows(check: dict[str, Any]) -> list[str]:
    rows = [
        f"| blocking reads / step | {check['baseline_per_step']:.2f} | {check['current_per_step']:.2f} "
        f"| {'❌ more reads' if check['status'] == 'fail' else '✅'} |"
    ]
    return rows


def _tpot_row(check: dict[str, Any]) -> str:
    if check["status"] == "skipped":
        return f"| TPOT | – | – | ⏭ {_md(check['reason'])} |"
    mark = "❌" if check["status"] == "fail" else CHANGE_MARKS.get(check.get("change", ""), "✅")
    return (
        f"| TPOT (median) | {fmt_duration_ms(check['baseline_ms'])} | {fmt_duration_ms(check['current_ms'])} "
        f"| {mark} {_md(gate_change_text(check))} |"
    )


def gate_change_text(check: dict[str, Any]) -> str:
    """The TPOT check's change, interval, limit and reason, as the console and Markdown both write it:
    `+1.2% [−0.3, +2.6] (95% CI), limit +3.0%: within the threshold`."""
    return (
        f"{fmt_change(check.get('ratio'))} (95% CI), "
        f"limit {fmt_percent(check.get('threshold'), signed=True)}: {plain(check.get('reason'))}"
    )


def render_gate_markdown(verdict: dict[str, Any]) -> str:
    """A heading with the verdict, a table of both checks, new read sites and warnings."""
    reads = next(c for c in verdict["checks"] if c["name"] == "blocking_reads")
    tpot = next(c for c in verdict["checks"] if c["name"] == "tpot")
    title = "✅ bubblescope gate: pass" if verdict["verdict"] == "pass" else "❌ bubblescope gate: regression"
    lines = [
        f"## {title}",
        "",
        "| check | baseline | current | verdict |",
        "| --- | --- | --- | --- |",
        *_reads_rows(reads),
        _tpot_row(tpot),
        "",
    ]
    if reads["increased_sites"]:
        lines += [
            "**New or more frequent host-blocking reads** (each stalls the GPU every step):",
            "",
            "| site | baseline / step | current / step |",
            "| --- | --- | --- |",
        ]
        lines += [
            f"| {_md(s['site'])} | {s['baseline']:.2f} | {s['current']:.2f} |"
            for s in reads["increased_sites"]
        ]
        lines.append("")
    for warning in verdict.get("warnings", []):
        lines.append(f"> ⚠️ {_md(warning)}")
    if verdict.get("diff"):
        from bubblescope.report.diff_render import render_diff_markdown

        lines += ["", render_diff_markdown(verdict["diff"], heading_level=3)]
    lines += [
        "",
        f"_baseline: {_md(verdict['baseline']['path'])} · current: {_md(verdict['current']['path'])}_",
        "",
    ]
    return "\n".join(lines)
