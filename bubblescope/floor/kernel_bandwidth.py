"""Achieved bandwidth per kernel and the breakdown of a step's GPU time against the floor.

A workload that knows the bytes its kernels must read (the reference decoder does:
`reference_model/kernel_bytes.py`) gives rules — a family name, kernel name prefixes, optionally the
launch grid's x, and bytes per step. Here each GPU op of a profiled step is matched to the first rule
whose prefix and grid fit, and charged its *critical-path* time: under PDL and inside a CUDA graph the
next kernel starts early, loads its weights and waits, so summed kernel durations count time twice.
Charging each op `end - max(last_end, start)` (the time by which it moved the device's last end forward)
and a stretch with nothing running to "idle" makes the charges add up to the step's GPU interval:

    kernel A   |=========|
    kernel B        |--wait--|=====|        B is charged only past A's end
    idle                            ....    no op running
    kernel C                            |==|

The path runs over each device's whole timeline and each op's charge (and the idle just before it) goes
to the step that launched it, so run-ahead steps whose ops interleave are charged correctly.
Per family: launches, critical-path ns and bytes per step; achieved GB/s = bytes ÷ critical ns; the
time the bytes would take at the ceiling (the copy bandwidth measured on the device that ran); the
excess over it. Means over the analysis' typical steps (warm-up and outlier steps left out), so the rows
add up to the mean GPU step.

Beside the rows, `launch_path`: per typical step, the kernel launches (a CUDA graph's kernels count one
each: a replay launches them all) and the launch gap — the summed time the device had no op running
between the step's consecutive kernels on this critical path (the idle row, step by step). Median step
and a 95% interval (the profiled window is one repeat: `stats.median_with_ci` resamples its steps), plus
the per-step values, so two runs compare with intervals (`bubblescope diff`). Never imports torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bubblescope.stats import median_with_ci, stable_seed

# What the rules do not cover: kernels of no family, and stretches with no kernel running.
OTHER_FAMILY = "other kernels (bytes not modelled)"
IDLE_FAMILY = "idle (no kernel running)"
LAUNCH_PATH_INTERVAL = "median step, 95% CI: bootstrap of the profiled window's typical steps"


def family_of_ops(names: np.ndarray, grid_x: np.ndarray, rules: list[dict[str, Any]]) -> np.ndarray:
    """[n] int64: index of the first rule each op matches, -1 for none (matched once per name+grid)."""
    out = np.full(len(names), -1, dtype=np.int64)
    cache: dict[tuple[str, int], int] = {}
    for index, (name, grid) in enumerate(zip(names.tolist(), grid_x.tolist(), strict=True)):
        key = (str(name), int(grid))
        if key not in cache:
            cache[key] = next(
                (
                    i
                    for i, rule in enumerate(rules)
                    if any(key[0].startswith(prefix) for prefix in rule["kernels"])
                    and rule.get("grid_x") in (None, key[1])
                ),
                -1,
            )
        out[index] = cache[key]
    return out


def critical_charges(start_ns: np.ndarray, end_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per op (ops of one device sorted by start): its critical-path ns, and the idle ns just before it
    (time since the device's last end, 0 when it was still busy)."""
    if not len(start_ns):
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    last_end = np.maximum.accumulate(end_ns)
    previous = np.concatenate(([start_ns[0]], last_end[:-1]))
    charges = np.maximum(end_ns - np.maximum(previous, start_ns), 0)
    idle_before = np.maximum(start_ns - previous, 0)
    return charges.astype(np.int64), idle_before.astype(np.int64)


def breakdown(
    gpu: pd.DataFrame,
    step_of_op: np.ndarray,
    typical: np.ndarray,
    rules: list[dict[str, Any]],
    ceiling_gbps: float | None,
) -> dict[str, Any]:
    """The `bandwidth` block: one row per family plus other kernels and idle (module docstring).

    Args:
        gpu: one rank's GPU ops (name, grid_x, device, start_ns, end_ns), any order.
        step_of_op: [n] step index of each op (-1 outside every step).
        typical: [n_steps] bool, the steps to average over.
        rules: the workload's bytes rules.
        ceiling_gbps: the bandwidth the floor uses (None: no at-ceiling columns).
    """
    families = [rule["family"] for rule in rules] + [OTHER_FAMILY]
    family = family_of_ops(gpu["name"].to_numpy(), gpu["grid_x"].to_numpy(), rules)
    family = np.where(family < 0, len(rules), family)
    charges = np.zeros(len(gpu), dtype=np.int64)
    idle_before = np.zeros(len(gpu), dtype=np.int64)
    # The critical path runs over each device's whole timeline: with run-ahead (no host reads), step k+1's
    # first ops run before step k's graph, so a step's own ops alone would show the other step as idle.
    for _, ops in gpu.groupby("device", sort=True):
        order = ops.sort_values("start_ns", kind="stable")
        position = gpu.index.get_indexer(order.index)
        charged, idle = critical_charges(order["start_ns"].to_numpy(), order["end_ns"].to_numpy())
        charges[position], idle_before[position] = charged, idle
    in_typical = (step_of_op >= 0) & typical[np.maximum(step_of_op, 0)] if len(typical) else step_of_op < -1
    # Each op carries the idle just before it: the device was waiting for that op's step.
    charged = np.bincount(family[in_typical], weights=charges[in_typical], minlength=len(families))
    launches = np.bincount(family[in_typical], minlength=len(families)).astype(np.float64)
    names = gpu["name"].astype(str).to_numpy()[in_typical]
    by_name = pd.Series(charges[in_typical]).groupby(names).sum().to_dict()
    idle_ns = int(idle_before[in_typical].sum())
    steps_used = max(int(typical.sum()), 1)
    is_kernel = (gpu["kind"] == "kernel").to_numpy() if "kind" in gpu else np.ones(len(gpu), dtype=bool)
    per_step_launches = np.bincount(step_of_op[in_typical & is_kernel], minlength=len(typical))[typical]
    per_step_gap = np.bincount(
        step_of_op[in_typical], weights=idle_before[in_typical], minlength=len(typical)
    )[typical]
    rows = [
        _family_row(
            families[i],
            launches[i] / steps_used,
            charged[i] / steps_used,
            rules[i] if i < len(rules) else None,
            ceiling_gbps,
        )
        for i in range(len(families))
    ]
    rows.append(_family_row(IDLE_FAMILY, 0.0, idle_ns / steps_used, None, ceiling_gbps))
    rows.sort(key=lambda row: -(row["excess_ns"] if row["excess_ns"] is not None else row["critical_ns"]))
    modelled = sum(int(rule["bytes_per_step"]) for rule in rules)
    return {
        "ceiling_gbps": ceiling_gbps,
        "steps": int(typical.sum()),
        "gpu_step_ns": round(float(charged.sum() + idle_ns) / steps_used, 1),
        "bytes_modelled_per_step": modelled,
        "at_ceiling_ns": round(modelled / ceiling_gbps, 1) if ceiling_gbps else None,
        "families": rows,
        "by_kernel": _by_kernel(rules, by_name, steps_used, ceiling_gbps),
        "launch_path": launch_path(per_step_launches, per_step_gap),
    }


def launch_path(launches: np.ndarray, gap_ns: np.ndarray) -> dict[str, Any]:
    """Kernel launches and launch gap ns per step: median with interval, and the per-step values.

    Args:
        launches: [n] kernel launches of each typical step.
        gap_ns: [n] ns with no op running between that step's consecutive kernels (critical path).
    Returns:
        {steps, launches_per_step, launch_gap_ns_per_step ({est, lo, hi}, null without steps),
         launches_by_step, launch_gap_ns_by_step, interval}.
    """
    out: dict[str, Any] = {
        "steps": int(len(launches)),
        "launches_by_step": [int(x) for x in launches],
        "launch_gap_ns_by_step": [int(round(float(x))) for x in gap_ns],
        "interval": LAUNCH_PATH_INTERVAL,
    }
    for key, values in (("launches_per_step", launches), ("launch_gap_ns_per_step", gap_ns)):
        if not len(values):
            out[key] = None
            continue
        est, lo, hi = median_with_ci(
            [np.asarray(values, dtype=np.float64)], seed=stable_seed("launch_path", key)
        )
        out[key] = {"est": round(est, 1), "lo": round(lo, 1), "hi": round(hi, 1)}
    return out


def _family_row(
    family: str, launches: float, critical_ns: float, rule: dict[str, Any] | None, ceiling_gbps: float | None
) -> dict[str, Any]:
    size = int(rule["bytes_per_step"]) if rule is not None else None
    at_ceiling = size / ceiling_gbps if size is not None and ceiling_gbps else None
    achieved = size / critical_ns if size and critical_ns > 0 else None
    return {
        "family": family,
        "kernels": list(rule["kernels"]) if rule is not None else [],
        "grid_x": rule.get("grid_x") if rule is not None else None,
        "launches_per_step": round(launches, 2),
        "launches_expected": rule.get("launches") if rule is not None else None,
        "critical_ns": round(critical_ns, 1),
        "bytes_per_step": size,
        "achieved_gbps": round(achieved, 1) if achieved is not None else None,
        "fraction_of_ceiling": round(achieved / ceiling_gbps, 4) if achieved and ceiling_gbps else None,
        "at_ceiling_ns": round(at_ceiling, 1) if at_ceiling is not None else None,
        # Over the ceiling's time; for rows without bytes (other kernels, idle) all of it is excess.
        "excess_ns": round(critical_ns - (at_ceiling or 0.0), 1) if ceiling_gbps else None,
    }


def _by_kernel(
    rules: list[dict[str, Any]], charged_by_name: dict[str, float], steps: int, ceiling_gbps: float | None
) -> dict[str, dict[str, Any]]:
    """Per kernel name: the bytes of every rule naming it, its critical ns, achieved GB/s.

    A rule whose bytes are shared by several kernels present in the trace cannot say which of them read
    what: its kernels get no per-kernel number (the family row has the joint one). Giving each the whole
    rule once showed a combine kernel that overlaps its producer under PDL at 600 TB/s."""

    named = [
        (rule, {name for name in charged_by_name if any(name.startswith(p) for p in rule["kernels"])})
        for rule in rules
    ]
    shared = {name for _, names in named if len(names) > 1 for name in names}
    out = {}
    for name, charged in charged_by_name.items():
        size = sum(int(rule["bytes_per_step"]) for rule, names in named if name in names)
        if not size or name in shared:
            continue
        critical = charged / steps
        achieved = size / critical if critical > 0 else None
        out[name] = {
            "bytes_per_step": size,
            "critical_ns_per_step": round(critical, 1),
            "achieved_gbps": round(achieved, 1) if achieved else None,
            "fraction_of_ceiling": round(achieved / ceiling_gbps, 4) if achieved and ceiling_gbps else None,
        }
    return out


def attach_kernel_bandwidth(
    analysis: dict[str, Any], trace_path: str | Path, kernel_bytes: dict[str, Any] | None
) -> None:
    """Add `bandwidth` (the family breakdown) to an analysis/1 dict and achieved bandwidth to its
    `kernels[]` rows, from the workload's `kernel_bytes` block ({rules, ceiling_gbps}); no-op without
    rules. Reads the trace's GPU table again (a run's trace: milliseconds)."""
    rules = (kernel_bytes or {}).get("rules")
    if not rules or not analysis.get("gpu_measured"):
        return
    from bubblescope.analysis.traces import typical_steps
    from bubblescope.trace.correlate import correlate_launches
    from bubblescope.trace.load import stream_trace
    from bubblescope.trace.steps import find_steps, launch_steps_of
    from bubblescope.trace.tables import build_tables_streamed

    path = Path(trace_path)
    streamed = stream_trace(path)
    tables = build_tables_streamed(streamed.chunks(), lambda: streamed.meta, path, rank=0)
    steps = find_steps(tables)
    gpu = correlate_launches(tables.gpu, tables.runtime)
    step_of_op = launch_steps_of(gpu, steps)
    step_rows = [s for s in analysis.get("steps", []) if s.get("rank", 0) == tables.rank]
    typical = typical_steps(step_rows) if len(step_rows) == len(steps) else np.ones(len(steps), dtype=bool)
    block = breakdown(gpu, step_of_op, typical, rules, kernel_bytes.get("ceiling_gbps"))
    block["ceiling_source"] = kernel_bytes.get("ceiling_source")
    block["model"] = kernel_bytes.get("model")
    analysis["bandwidth"] = block
    for row in analysis.get("kernels", []):
        known = block["by_kernel"].get(row["name"])
        if known:
            row.update(known)
