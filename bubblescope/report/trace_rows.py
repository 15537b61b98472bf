"""A bare trace's report content as plain text: title, warnings, per-step items, per-device totals.

An analysis/1 without a RunRecord (`bubblescope report trace.json`, a profile folder) is shown by
markdown.py and html.py from these.
"""

from __future__ import annotations

from typing import Any

from bubblescope.floor.trace_floor import floor_line
from bubblescope.report.cells import (
    GAP_CLASSES,
    READS_NOT_DETECTABLE,
    Rows,
    fmt_duration_ns,
    fmt_measured_ns,
    plain,
    reads_undetectable,
    steps_and_ranks,
)
from bubblescope.report.views import utilization_text


def trace_title(analysis: dict[str, Any]) -> str:
    inputs = analysis.get("inputs") or []
    return ", ".join(plain(i.get("path")) for i in inputs if isinstance(i, dict)) or "trace"


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
