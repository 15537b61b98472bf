"""Markdown view of a `bubblescope.analysis/1` dict (for CI summaries and pull requests)."""

from __future__ import annotations

GAP_CLASSES = ("sync", "host", "launch", "dependency", "outside")
TOP_GAPS_SHOWN = 10


def _us(ns: float) -> str:
    return f"{ns / 1e3:.1f}"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_analysis_markdown(analysis: dict) -> str:
    """The whole analysis as Markdown: summary, idle by cause, devices, reads by site, top gaps."""
    summary = analysis["summary"]
    lines = [
        "## bubblescope analyze",
        "",
        f"- steps: **{summary['steps']}** (from `{analysis['step_source']}`)",
        f"- blocking reads per step: **{summary['blocking_reads_per_step']:g}**",
        f"- GPU busy per step: {_us(summary['gpu_busy_ns_per_step'])} µs, "
        f"idle per step: {_us(summary['idle_ns_per_step'])} µs",
    ]
    lines += [f"- warning: {_cell(w)}" for w in analysis["warnings"]]
    by_class = summary["idle_by_class_ns_per_step"]
    lines += [
        "",
        "### GPU idle per step by cause (µs)",
        "",
        "| " + " | ".join(by_class) + " |",
        "|" + "---:|" * len(by_class),
        "| " + " | ".join(_us(v) for v in by_class.values()) + " |",
    ]
    lines += [
        "",
        "### Devices (µs, whole trace)",
        "",
        "| rank | device | span | busy | idle | " + " | ".join(GAP_CLASSES) + " |",
        "|" + "---:|" * (5 + len(GAP_CLASSES)),
    ]
    for d in analysis["devices"]:
        cells = [d["rank"], d["device"], _us(d["span_ns"]), _us(d["busy_ns"]), _us(d["idle_ns"])]
        cells += [_us(d["idle_by_class_ns"][c]) for c in GAP_CLASSES]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines += ["", "### Host-blocking reads by site", ""]
    if analysis["syncs"]:
        lines += [
            "| site | op | count | per step | blocked µs | bubble µs | fix |",
            "|---|---|---:|---:|---:|---:|---|",
        ]
        for s in analysis["syncs"]:
            lines.append(
                f"| `{_cell(s['site'])}` | `{_cell(s['op'] or s['api'])}` | {s['count']} | "
                f"{s['per_step']:g} | {_us(s['blocked_ns'])} | {_us(s['bubble_ns'])} | "
                f"{_cell(s['hint'])} |"
            )
    else:
        lines.append("none found")
    lines += [
        "",
        "### Largest GPU idle gaps",
        "",
        "| rank | step | start µs | dur µs | class | blame |",
        "|---:|---:|---:|---:|---|---|",
    ]
    for g in analysis["gaps_top"][:TOP_GAPS_SHOWN]:
        lines.append(
            f"| {g['rank']} | {g['step']} | {_us(g['start_ns'])} | {_us(g['dur_ns'])} | "
            f"{g['class']} | {_cell(g['blame'])} |"
        )
    return "\n".join(lines) + "\n"
