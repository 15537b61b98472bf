"""One representative step as lanes of slices, gaps and syncs: the data behind the report's timeline.

The step is the median-duration step of the rank (the first such one on ties). Times are relative
to the rank's earliest event, as everywhere in `bubblescope.analysis/1`.

The host lane shows the step's host window; the GPU lanes show the GPU work OF that step (ops
launched in its host window, plus ops launched outside every window that run in its GPU interval),
not whatever ran during the host window: under host run-ahead those are earlier steps' kernels. The
drawn window (`start_ns`, `dur_ns`) is the union of the host window and the GPU interval.

    host   |--step k host window--|
    GPU                 |==ops launched in step k==|
           ^ start_ns                              ^ start_ns + dur_ns

A tensor-parallel analysis also has `rank_timelines`: the same dict for every other rank at rank 0's
step (`build_rank_timelines`), so the report can draw all ranks' lanes for one decode step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bubblescope.trace.steps import launch_steps_of

if TYPE_CHECKING:
    from bubblescope.ranks.analysis import RankAnalysis

MAX_TIMELINE_SLICES = 4000


def build_rank_timelines(
    ranks: list[RankAnalysis], blames_of: Callable[[RankAnalysis, tuple[int, int]], Callable]
) -> list[dict]:
    """The `rank_timelines` entry of a multi-rank (tensor-parallel) analysis: the timeline of every rank
    after rank 0, at rank 0's representative step (rank 0's own is the `timeline` entry), so the report
    can draw every rank's lanes for the same decode step.

    Args:
        ranks: every rank's analysis, rank 0 first.
        blames_of: (rank, window) -> (gap rows DataFrame -> blame text of each), as `gap_blames`.

    Returns:
        one `build_timeline` dict per rank after rank 0 that has steps; empty for a single rank or when
        rank 0 has no steps.
    """
    if len(ranks) < 2 or not len(ranks[0].steps):
        return []
    step0 = median_step(ranks[0])
    timelines = []
    for rank in ranks[1:]:
        # A rank with fewer steps than rank 0 shows its own median step rather than none.
        step = step0 if step0 < len(rank.steps) else None
        timeline = build_timeline(rank, lambda window, r=rank: blames_of(r, window), step=step)
        if timeline is not None:
            timelines.append(timeline)
    return timelines


def median_step(rank: RankAnalysis) -> int:
    """Index of the rank's median-duration step (the first such one on ties); the rank has steps."""
    durations = rank.steps.end_ns - rank.steps.start_ns
    return int(np.argsort(durations, kind="stable")[(len(durations) - 1) // 2])


def build_timeline(
    rank: RankAnalysis, make_blamer: Callable[[tuple[int, int]], Callable], step: int | None = None
) -> dict | None:
    """The `timeline` entry of the analysis dict for `rank`, or None without steps.

    Args:
        rank: one rank's analysis.
        make_blamer: (start_ns, end_ns) window -> (gap rows DataFrame -> blame text of each: sync
            site, host work, or device-side cause).
        step: index of the step to show; None = the median-duration step.

    Returns:
        dict with step, rank, start_ns/dur_ns (drawn window), host_start_ns/host_dur_ns (host window),
        gpu_start_ns/gpu_dur_ns (GPU interval, extent over devices), lanes, slices, gaps, syncs,
        truncated.
    """
    steps = rank.steps
    if not len(steps):
        return None
    if step is None:
        step = median_step(rank)
    host_start, host_end = int(steps.start_ns[step]), int(steps.end_ns[step])
    gpu_start, gpu_end = _gpu_interval(rank, step, host_start)
    step_ops = _step_ops(rank, step, gpu_start, gpu_end)
    start = min(host_start, gpu_start, int(step_ops["start_ns"].min()) if len(step_ops) else host_start)
    end = max(host_end, gpu_end)
    origin = rank.tables.origin_ns
    slices = _host_slices(rank, host_start, host_end) + _gpu_slices(step_ops, origin)
    gpu = rank.gpu
    lanes = [{"lane": "host", "kind": "host"}] + [
        {"lane": f"GPU {d} stream {s}", "kind": "gpu"}
        for d, s in sorted(set(zip(gpu["device"].tolist(), gpu["stream"].tolist(), strict=True)))
    ]
    return {
        "step": step,
        "rank": rank.tables.rank,
        "start_ns": start - origin,
        "dur_ns": end - start,
        "host_start_ns": host_start - origin,
        "host_dur_ns": host_end - host_start,
        "gpu_start_ns": gpu_start - origin,
        "gpu_dur_ns": gpu_end - gpu_start,
        "lanes": lanes,
        "slices": slices[:MAX_TIMELINE_SLICES],
        "gaps": _step_gaps(rank, step, make_blamer((start, end))),
        "syncs": _step_syncs(rank, host_start, host_end),
        "truncated": len(slices) > MAX_TIMELINE_SLICES,
    }


def _gpu_interval(rank: RankAnalysis, step: int, host_start: int) -> tuple[int, int]:
    """[start, end) of the step's GPU interval over all devices; empty at the host start without GPU ops."""
    if not rank.gpu_bounds:
        return host_start, host_start
    bounds = np.stack(list(rank.gpu_bounds.values()))  # [n_devices, n_steps + 1]
    return int(bounds[:, step].min()), int(bounds[:, step + 1].max())


def _step_ops(rank: RankAnalysis, step: int, gpu_start: int, gpu_end: int) -> pd.DataFrame:
    """GPU ops of the step: launched in its host window, or launched in no window and running inside
    its GPU interval (work enqueued between steps)."""
    gpu = rank.gpu
    launch_step = launch_steps_of(gpu, rank.steps)
    overlaps = (gpu["end_ns"].to_numpy() > gpu_start) & (gpu["start_ns"].to_numpy() < gpu_end)
    return gpu[(launch_step == step) | ((launch_step < 0) & overlaps)]


def _host_slices(rank: RankAnalysis, start: int, end: int) -> list[dict]:
    """Host ops and runtime calls of the launching thread overlapping the host window."""
    origin = rank.tables.origin_ns
    host = rank.tables.ops[(rank.tables.ops["cat"] == "cpu_op").to_numpy()]
    if rank.host_tid:
        host = host[(host["tid"] == rank.host_tid).to_numpy()]
        runtime = rank.tables.runtime[(rank.tables.runtime["tid"] == rank.host_tid).to_numpy()]
    else:
        runtime = rank.tables.runtime.iloc[:0]
    slices: list[dict] = []
    for table, cat in ((host, "cpu_op"), (runtime, "cuda_runtime")):
        slices.extend(_slices(table, start, end, origin, lambda _row: "host", lambda _row, c=cat: c))
    return slices


def _gpu_slices(ops: pd.DataFrame, origin: int) -> list[dict]:
    """The step's GPU ops, one slice each on its device/stream lane."""
    return [
        {
            "lane": f"GPU {r.device} stream {r.stream}",
            "name": str(r.name),
            "start_ns": int(r.start_ns) - origin,
            "dur_ns": int(r.end_ns - r.start_ns),
            "cat": "kernel" if r.kind == "kernel" else f"gpu_{r.kind}",
        }
        for r in ops.itertuples(index=False)
    ]


def _step_gaps(rank: RankAnalysis, step: int, blame_all: Callable) -> list[dict]:
    origin = rank.tables.origin_ns
    gaps = rank.gaps[(rank.gaps["step"] == step).to_numpy()]
    texts = blame_all(gaps) if len(gaps) else []
    return [
        {"lane": f"GPU {device}", "start_ns": start - origin, "dur_ns": dur, "class": cls, "blame": text}
        for device, start, dur, cls, text in zip(
            gaps["device"].tolist(),
            gaps["start_ns"].tolist(),
            gaps["dur_ns"].tolist(),
            gaps["class"].tolist(),
            texts,
            strict=True,
        )
    ]


def _step_syncs(rank: RankAnalysis, start: int, end: int) -> list[dict]:
    if not len(rank.reads):
        return []
    origin = rank.tables.origin_ns
    reads = rank.reads[((rank.reads["end_ns"] > start) & (rank.reads["start_ns"] < end)).to_numpy()]
    return [
        {
            "start_ns": int(r.start_ns) - origin,
            "dur_ns": int(r.end_ns - r.start_ns),
            "site": r.site,
            "op": r.op,
        }
        for r in reads.itertuples(index=False)
    ]


def _slices(table: pd.DataFrame, start: int, end: int, origin: int, lane_of, cat_of) -> list[dict]:
    inside = table[((table["end_ns"] > start) & (table["start_ns"] < end)).to_numpy()]
    return [
        {
            "lane": lane_of(r),
            "name": str(r.name),
            "start_ns": int(r.start_ns) - origin,
            "dur_ns": int(r.end_ns - r.start_ns),
            "cat": cat_of(r),
        }
        for r in inside.itertuples(index=False)
    ]
