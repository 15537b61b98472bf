"""Reduce per-rank results (`rank_results.RankResult`, rank order) to the `bubblescope.analysis/1` dict.

Everything that looks across ranks happens here, on the client: which steps are typical (medians over
every rank's steps), the top gaps of those steps, blocking reads grouped by site over all ranks, the
kernel table, the summary, and the cross-rank view (`rank_summary`: stragglers, slowest rank per step).
The timeline for drawing is not made here (it needs the ranks' tables: `analysis.analysis_dict`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from bubblescope.analysis.host_ops import host_op_rows
from bubblescope.analysis.kernel_table import kernel_category_rows, kernel_rows
from bubblescope.analysis.not_measured import null_unmeasured_analysis
from bubblescope.ranks.results import GAP_COLUMNS, STEP_CLASSES, TOP_GAPS, RankResult, fraction

SCHEMA = "bubblescope.analysis/1"
# A step this many times the median is flagged as a likely warm-up step.
OUTLIER_STEP_FACTOR = 10
# The window's first step also runs what the host queued before the profiler started (run-ahead) and
# waits for the profiler's start-up; above this multiple of the median GPU step it is left out of the
# per-step means (its reads still count). Without this, one 6.6 ms first step among 3.9 ms steps made
# "GPU busy/step" exceed TPOT on the TP=2 H200 sample.
FIRST_STEP_FACTOR = 1.25
# A rank whose median GPU step is this many times the median over ranks is a straggler: in a
# tensor-parallel step every rank waits for the slowest at the next collective.
STRAGGLER_FACTOR = 1.05

# What the read numbers mean (also in docs/analysis.md); written into every analysis dict.
DEFINITIONS = {
    "blocked_ns": "host time spent inside the read's blocking runtime calls",
    "lost_lead_ns": "GPU work the host had queued when the read began, lost because the device drained "
    "while the host waited (0 when the device was already idle or never drained); never more than "
    "blocked_ns",
    "bubble_ns": "expected saving if fixed: GPU idle (sync) that follows the read, at most its lost lead; "
    "bubble_ns <= lost_lead_ns <= blocked_ns",
    "drained": "how many of the reads drained the device",
}


def reduce_results(results: list[RankResult]) -> dict:
    """The analysis dict of these ranks, `timeline` None and `rank_timelines` empty."""
    steps_out = [s for result in results for s in result.steps]
    typical = typical_steps(steps_out)
    gaps_out, offset = [], 0
    for result in results:
        gaps_out.extend(top_gap_entries(result, typical[offset : offset + len(result.steps)]))
        offset += len(result.steps)
    gaps_out.sort(key=lambda g: -g["dur_ns"])
    steps_total = sum(result.steps_total for result in results)
    document = {
        "schema": SCHEMA,
        "inputs": [result.input for result in results],
        "warnings": [w for result in results for w in result.warnings],
        "step_source": results[0].step_source if results else "whole-trace",
        "gpu_measured": all(result.gpu_measured for result in results),
        "devices": [d for result in results for d in result.devices],
        "steps": steps_out,
        "syncs": sync_entries(
            [result.reads for result in results],
            n_steps=max(len(steps_out), 1),
            typical=typical,
            steps_per_rank=[len(result.steps) for result in results],
        ),
        "definitions": DEFINITIONS,
        "gaps_top": gaps_out[:TOP_GAPS],
        "kernels": kernel_rows([r.kernels for r in results], steps_total),
        "kernel_categories": kernel_category_rows([r.kernels for r in results], steps_total),
        "host_ops": host_op_rows([r.host_ops for r in results], steps_total),
        "summary": summary(steps_out),
        "timeline": None,
        "rank_timelines": [],
        "rank_summary": rank_summary(steps_out),
    }
    # A trace without GPU activity measured no GPU time: null there, never 0
    # (bubblescope.analysis.not_measured).
    return null_unmeasured_analysis(document)


def top_gap_entries(result: RankResult, typical: np.ndarray | None = None) -> list[dict]:
    """The largest gaps of the rank inside its typical steps (no warm-up/outlier step, no `outside`
    idle), when any typical step has gaps; otherwise the largest of all."""
    gaps = result.gap_candidates
    if typical is not None and len(typical):
        step = gaps["step"].to_numpy()
        in_typical = (step >= 0) & typical[np.clip(step, 0, len(typical) - 1)]
        # Idle outside every step (profiler start-up, between windows) is in the device totals; the
        # list names what slows the steps.
        if in_typical.any():
            gaps = gaps[in_typical]
    top = gaps.nlargest(TOP_GAPS, "dur_ns", keep="first")
    columns = [top[name].tolist() for name in GAP_COLUMNS]
    return [dict(zip(GAP_COLUMNS, values, strict=True)) for values in zip(*columns, strict=True)]


# The hint of a site whose every read falls outside the steps (set-up, the profiler's own stop): the
# kind's hint ("explicit synchronize in the loop") would send the reader to a loop it is not in.
OUTSIDE_STEPS_HINT = (
    "outside every decode step (set-up or tear-down, 0 per step): no step waits for it; if it runs inside "
    "your loop, mark the steps so that they cover it"
)


def sync_entries(
    read_frames: list[pd.DataFrame],
    n_steps: int,
    typical: np.ndarray | None = None,
    steps_per_rank: list[int] | None = None,
) -> list[dict]:
    """`syncs[]`: blocking reads grouped by (site, op, kind, api) over every rank, most bubble first.

    `count` holds every read; `per_step` only the reads of typical steps, over their number: a warm-up
    or outlier step never enters a per-step figure (issue 23 §4), as it never enters step times.

    Args:
        read_frames: each rank's `rank_results.read_table`, rank order.
        n_steps: steps over all ranks (for `per_step` when `typical` is None).
        typical: [steps over all ranks, rank order] bool, `typical_steps`. Default None: every step.
        steps_per_rank: each rank's step count (how `typical` splits by rank); needed with `typical`.
    """
    by_typical = typical is not None and steps_per_rank is not None
    frames, offset = [], 0
    for index, reads in enumerate(read_frames):
        step = reads["step"].to_numpy()
        in_step = step >= 0
        if by_typical:
            mask = typical[offset : offset + steps_per_rank[index]]
            offset += steps_per_rank[index]
            if len(mask):
                in_step &= mask[np.clip(step, 0, len(mask) - 1)]
        if len(reads):
            frames.append(reads.assign(in_step=in_step, outside=step < 0))
    if by_typical:
        n_steps = max(int(np.sum(typical)), 1)
    if not frames:
        return []
    reads = pd.concat(frames, ignore_index=True)
    keys = ["site", "op", "kind", "api"]
    grouped = (
        reads.groupby(keys, sort=False)
        .agg(
            count=("read_id", "size"),
            in_steps=("in_step", "sum"),
            blocked_ns=("blocked_ns", "sum"),
            bubble_ns=("bubble_ns", "sum"),
            lost_lead_ns=("lost_lead_ns", "sum"),
            drained=("drained", "sum"),
            wait_ns=("wait_ns", "sum"),
            hint=("hint", "first"),
            inner_op=("inner_op", "first"),
            outside=("outside", "all"),
        )
        .reset_index()
    )
    grouped = grouped.sort_values(["bubble_ns", "blocked_ns"], ascending=False, kind="stable")
    return [
        {
            "site": r.site,
            "op": r.op,
            "kind": r.kind,
            "api": r.api,
            "inner_op": r.inner_op,
            "count": int(r.count),
            "per_step": round(float(r.in_steps) / n_steps, 4),
            "blocked_ns": int(r.blocked_ns),
            "bubble_ns": int(r.bubble_ns),
            "lost_lead_ns": int(r.lost_lead_ns),
            "drained": int(r.drained),
            "wait_ns": int(r.wait_ns),
            "hint": OUTSIDE_STEPS_HINT if r.outside else r.hint,
        }
        for r in grouped.itertuples(index=False)
    ]


def typical_steps(steps: list[dict]) -> np.ndarray:
    """[n_steps] bool: the steps per-step figures and the top-gap list use.

    Left out: a step whose host window or GPU interval is over OUTLIER_STEP_FACTOR x the median
    (warm-up: lazy init, compilation), and the window's first step when its GPU interval is over
    FIRST_STEP_FACTOR x the median (it also waited for the profiler's start-up). All steps are typical
    when that would leave none.
    """
    n_steps = len(steps)
    if not n_steps:
        return np.zeros(0, dtype=bool)
    median_ns = float(np.median([s["dur_ns"] for s in steps]))
    gpu_median_ns = float(np.median([s["gpu_dur_ns"] for s in steps]))
    first_is_ramp = n_steps >= 3 and steps[0]["gpu_dur_ns"] > FIRST_STEP_FACTOR * max(gpu_median_ns, 1.0)
    mask = np.asarray(
        [
            s["dur_ns"] <= OUTLIER_STEP_FACTOR * max(median_ns, 1.0)
            and s["gpu_dur_ns"] <= OUTLIER_STEP_FACTOR * max(gpu_median_ns, 1.0)
            and not (index == 0 and first_is_ramp)
            for index, s in enumerate(steps)
        ],
        dtype=bool,
    )
    return mask if mask.any() else np.ones(n_steps, dtype=bool)


def summary(steps: list[dict]) -> dict:
    """The `summary` entry: per-step figures, reads included, over the typical steps."""
    n_steps = len(steps)
    if not n_steps:
        return {
            "steps": 0,
            "blocking_reads_per_step": 0.0,
            "gpu_busy_ns_per_step": 0,
            "kernel_time_ns_per_step": None,
            "idle_ns_per_step": 0,
            "idle_by_class_ns_per_step": {c: 0 for c in STEP_CLASSES},
            "profiler_ns_per_step": 0,
            "gpu_step_ns_per_step": 0,
            "gpu_step_ns_median": 0,
            "step_dur_ns_median": 0,
            "outlier_steps": 0,
            "gpu_utilization": None,
        }
    # Per-step figures, reads included, average only the typical steps: one 75 ms warm-up step among
    # 1 ms steps would otherwise dominate every "per step" time, and a warm-up step's extra reads
    # (allocator, lazy init) made "1.2 blocking reads/step" of a loop that reads once per step. The
    # reads of left-out steps still count in `syncs[].count`. Means (not medians) keep the idle
    # classes additive.
    # Under host run-ahead a slow step can show on the GPU side only, so both durations are checked.
    mask = typical_steps(steps)
    typical = [s for s, keep in zip(steps, mask.tolist(), strict=True) if keep]
    n_typical = len(typical)
    return {
        "steps": n_steps,
        "blocking_reads_per_step": round(sum(s["blocking_reads"] for s in typical) / n_typical, 4),
        "gpu_busy_ns_per_step": int(round(sum(s["gpu_busy_ns"] for s in typical) / n_typical)),
        "idle_ns_per_step": int(round(sum(s["idle_ns"] for s in typical) / n_typical)),
        "idle_by_class_ns_per_step": {
            c: int(round(sum(s["idle_by_class_ns"][c] for s in typical) / n_typical)) for c in STEP_CLASSES
        },
        "kernels_per_step": round(sum(s["kernels"] for s in typical) / n_typical, 2),
        # Summed traced kernel durations over the same steps: above `gpu_busy_ns_per_step` when kernels
        # overlap (PDL, concurrent streams; report/kernel_overlap.py says so under the kernel table).
        "kernel_time_ns_per_step": _kernel_time_per_step(typical),
        # Part of the `host` idle above: the profiler's estimated share (detect.tracing_cost), never a saving.
        "profiler_ns_per_step": int(round(sum(s.get("profiler_ns", 0) for s in typical) / n_typical)),
        # The GPU time per step (launch-attributed interval): under run-ahead this tracks TPOT, where the
        # host window (`step_dur_ns_median`) only shows how long the host took to enqueue a step.
        "gpu_step_ns_per_step": int(round(sum(s["gpu_dur_ns"] for s in typical) / n_typical)),
        # Busy over the typical steps' GPU intervals (time-weighted); null when no step ran on the GPU.
        "gpu_utilization": fraction(
            sum(s["gpu_busy_ns"] for s in typical), sum(s["gpu_dur_ns"] for s in typical)
        ),
        # The first profiled step also carries the GPU's idle from the window's start (an empty queue,
        # profiler start-up): the median is the steady-state figure to set beside the timed TPOT.
        "gpu_step_ns_median": int(np.median([s["gpu_dur_ns"] for s in steps])),
        "outlier_steps": n_steps - n_typical,
        "step_dur_ns_median": int(np.median([s["dur_ns"] for s in steps])),
    }


def _kernel_time_per_step(typical: list[dict]) -> int | None:
    """Mean summed kernel time over the typical steps; None when a step does not carry it."""
    if any(s.get("kernel_ns") is None for s in typical):
        return None
    return int(round(sum(s["kernel_ns"] for s in typical) / len(typical)))


def rank_summary(steps: list[dict]) -> dict[str, Any] | None:
    """The cross-rank view of `steps[]`, or None with fewer than two ranks that have steps.

    Returns:
        `ranks` (how many have steps), `gpu_step_ns_median` (median over ranks of each rank's median
        GPU step), `stragglers` (ranks whose median GPU step is over STRAGGLER_FACTOR x that, slowest
        first: rank, gpu_step_ns_median, ratio) and `slowest_per_step` (per step index that two or more
        ranks have: the rank with the longest GPU interval, its gpu_dur_ns, and the median over ranks).
    """
    by_rank: dict[int, list[dict]] = {}
    for step in steps:
        by_rank.setdefault(int(step["rank"]), []).append(step)
    if len(by_rank) < 2:
        return None
    medians = {rank: int(np.median([s["gpu_dur_ns"] for s in own])) for rank, own in by_rank.items()}
    overall = int(np.median(list(medians.values())))
    stragglers = sorted(
        (
            {"rank": rank, "gpu_step_ns_median": ns, "ratio": round(ns / overall, 4)}
            for rank, ns in medians.items()
            if overall > 0 and ns > STRAGGLER_FACTOR * overall
        ),
        key=lambda entry: (-entry["gpu_step_ns_median"], entry["rank"]),
    )
    by_index: dict[int, list[dict]] = {}
    for step in steps:
        by_index.setdefault(int(step["index"]), []).append(step)
    slowest = []
    for index in sorted(by_index):
        same = by_index[index]
        if len(same) < 2:
            continue
        # The first rank in rank order wins a tie.
        worst = max(same, key=lambda s: (s["gpu_dur_ns"], -int(s["rank"])))
        slowest.append(
            {
                "index": index,
                "rank": int(worst["rank"]),
                "gpu_dur_ns": int(worst["gpu_dur_ns"]),
                "median_gpu_dur_ns": int(np.median([s["gpu_dur_ns"] for s in same])),
            }
        )
    return {
        "ranks": len(by_rank),
        "gpu_step_ns_median": overall,
        "stragglers": stragglers,
        "slowest_per_step": slowest,
    }
