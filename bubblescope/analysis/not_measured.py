"""What a trace without GPU activity cannot measure is null, never 0 (docs/SCHEMAS.md).

A CPU run (or a trace with no GPU events) has no GPU timeline: its GPU busy time, idle by class,
kernels per step, and each read's blocked time, lost lead and GPU bubble are unknown, not zero. A 0
there reads as "measured, nothing found" and was printed as `GPU busy 0.0 µs` beside "not measured".
Writers null these fields with the functions below; readers pass documents written before 2026-12-03
(zeros beside `gpu_measured: false`) through the same functions, so every surface sees null and says
"not measured". Counts that a CPU trace does measure (steps, blocking reads per step, a read site's
count and per-step rate) are kept.
"""

from __future__ import annotations

from typing import Any

# analysis/1 `summary` and a RunRecord's `analysis` block: per-step GPU numbers.
GPU_PER_STEP_KEYS = (
    "gpu_busy_ns_per_step",
    "idle_ns_per_step",
    "kernels_per_step",
    "kernel_time_ns_per_step",
    "gpu_step_ns_per_step",
    "gpu_step_ns_median",
    "gpu_utilization",
)
# analysis/1 `steps[]`: one step's GPU numbers.
GPU_STEP_KEYS = (
    "gpu_busy_ns",
    "idle_ns",
    "kernels",
    "kernel_ns",
    "gpu_dur_ns",
    "gpu_start_ns",
    "gpu_utilization",
)
# `syncs[]`: what a read cost the GPU or the host waiting on it (a CPU read does not block).
SYNC_TIME_KEYS = ("blocked_ns", "bubble_ns", "lost_lead_ns", "wait_ns", "drained")
IDLE_KEYS = ("idle_by_class_ns_per_step", "idle_by_class_ns")


def _nulled(block: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """A copy of `block` with `keys` and every idle-by-class value null (absent keys stay absent)."""
    out = dict(block)
    for key in keys:
        if key in out:
            out[key] = None
    for key in IDLE_KEYS:
        if isinstance(out.get(key), dict):
            out[key] = {cls: None for cls in out[key]}
    return out


def null_unmeasured_syncs(syncs: Any) -> Any:
    """A copy of `syncs[]` with each row's blocked time, lost lead and bubble null."""
    if not isinstance(syncs, list):
        return syncs
    return [
        {**row, **{key: None for key in SYNC_TIME_KEYS if key in row}} if isinstance(row, dict) else row
        for row in syncs
    ]


def null_unmeasured_analysis(analysis: Any) -> Any:
    """An analysis/1 document, its GPU numbers null when `gpu_measured` is false (a new top-level dict;
    the input is not changed)."""
    if not isinstance(analysis, dict) or analysis.get("gpu_measured") is not False:
        return analysis
    out = dict(analysis)
    if isinstance(out.get("summary"), dict):
        out["summary"] = _nulled(out["summary"], GPU_PER_STEP_KEYS)
    if isinstance(out.get("steps"), list):
        out["steps"] = [_nulled(s, GPU_STEP_KEYS) if isinstance(s, dict) else s for s in out["steps"]]
    out["syncs"] = null_unmeasured_syncs(out.get("syncs"))
    return out


def null_unmeasured_block(block: Any) -> Any:
    """A RunRecord's `analysis` block, its GPU numbers null when `gpu_measured` is false (a copy)."""
    if not isinstance(block, dict) or block.get("gpu_measured") is not False:
        return block
    out = _nulled(block, GPU_PER_STEP_KEYS)
    out["syncs"] = null_unmeasured_syncs(out.get("syncs"))
    return out


def null_unmeasured_record(record: Any) -> Any:
    """A RunRecord whose `analysis` block went through `null_unmeasured_block` (a new top-level dict)."""
    if not isinstance(record, dict) or not isinstance(record.get("analysis"), dict):
        return record
    return {**record, "analysis": null_unmeasured_block(record["analysis"])}
