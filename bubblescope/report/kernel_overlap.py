"""The line under every kernel table when the run's kernels overlap (PDL or concurrent streams).

Under programmatic dependent launch a kernel is launched early and waits (gdc_wait) for its predecessor,
and kernels on other streams run at the same time, so a kernel's traced duration includes time other
kernels also cover. The table's `time / step` column then adds up to more than the GPU was busy (an H200
ling3-flash-e256 run with PDL: 5.9 ms of kernel time per 3.5 ms GPU step), and `share` is a share of that
summed kernel time (kernel_table.py divides by it), not of the step.

The two numbers: `summary.kernel_time_ns_per_step` (summed kernel durations) against
`summary.gpu_busy_ns_per_step` (the union of every GPU op), both means over the typical steps (the GPU
busy the summary shows). An analysis written before the first existed gives both over all its steps
instead, from `kernels[]` (a lower bound when the table was cut to its largest rows) and `steps[]`, and
the note says so.
"""

from __future__ import annotations

from typing import Any

from bubblescope.report.bandwidth_rows import bandwidth_rows
from bubblescope.report.cells import fmt_duration_ns, num

# Summed kernel time above GPU busy by more than this fraction of busy is overlap. Without overlap the
# sum is at most busy (busy also holds copies and memsets); the margin keeps a copy running beside a
# kernel, or rounding, from raising the note.
OVERLAP_MARGIN = 0.05


def kernel_time_and_busy_ns(analysis: dict[str, Any] | None) -> tuple[float, float, str] | None:
    """(summed kernel time, GPU busy) per step in ns over the same steps, and which steps those are in
    words ("" for the typical steps the summary uses); None when either is not measured."""
    analysis = analysis or {}
    if analysis.get("gpu_measured") is False:
        return None
    summary = analysis.get("summary") or {}
    kernel_ns, busy_ns = num(summary.get("kernel_time_ns_per_step")), num(summary.get("gpu_busy_ns_per_step"))
    which = ""
    if "kernel_time_ns_per_step" not in summary:
        kernel_ns, busy_ns, which = _over_all_steps(analysis)
    if kernel_ns is None or not busy_ns:
        return None
    return kernel_ns, busy_ns, which


def _over_all_steps(analysis: dict[str, Any]) -> tuple[float | None, float | None, str]:
    """An older analysis: summed `kernels[].total_ns` and `steps[].gpu_busy_ns`, each per step."""
    steps = [s for s in analysis.get("steps") or [] if isinstance(s, dict)]
    busy = [num(s.get("gpu_busy_ns")) for s in steps]
    totals = [num(k.get("total_ns")) for k in analysis.get("kernels") or [] if isinstance(k, dict)]
    if not steps or not totals or None in busy or None in totals:
        return None, None, ""
    which = f", both over all {len(steps)} profiled steps"
    return sum(totals) / len(steps), sum(busy) / len(steps), which  # type: ignore[arg-type]


def kernel_overlap_note(analysis: dict[str, Any] | None) -> str | None:
    """One sentence for under the kernel table's heading, or None when the kernels do not overlap."""
    measured = kernel_time_and_busy_ns(analysis)
    if measured is None:
        return None
    kernel_ns, busy_ns, which = measured
    if kernel_ns <= (1 + OVERLAP_MARGIN) * busy_ns:
        return None
    note = (
        f"Kernels overlap (PDL or concurrent streams): their traced durations add up to "
        f"{fmt_duration_ns(kernel_ns)} per step against {fmt_duration_ns(busy_ns)} of GPU busy{which}; "
        "a kernel's time includes its wait for the previous one, and share is of the summed kernel time, "
        "not of the step."
    )
    if bandwidth_rows(analysis)[1]:
        note += " The breakdown against the floor below charges each once."
    return note
