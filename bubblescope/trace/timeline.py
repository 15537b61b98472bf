"""One representative step as lanes of slices, gaps and syncs: the data behind the report's timeline.

The step is the median-duration step of the rank (the first such one on ties). Times are relative
to the rank's earliest event, as everywhere in `bubblescope.analysis/1`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from bubblescope.analysis import RankAnalysis

MAX_TIMELINE_SLICES = 4000


def build_timeline(rank: RankAnalysis, make_blamer: Callable[[tuple[int, int]], Callable]) -> dict | None:
    """The `timeline` entry of the analysis dict for `rank`, or None without steps.

    Args:
        rank: one rank's analysis.
        make_blamer: (start_ns, end_ns) window -> (gap row -> blame text: sync site, host frames, or
            device-side cause).
    """
    steps = rank.steps
    if not len(steps):
        return None
    durations = steps.end_ns - steps.start_ns
    step = int(np.argsort(durations, kind="stable")[(len(durations) - 1) // 2])
    start, end = int(steps.start_ns[step]), int(steps.end_ns[step])
    origin = rank.tables.origin_ns
    slices = _step_slices(rank, start, end)
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
        "lanes": lanes,
        "slices": slices[:MAX_TIMELINE_SLICES],
        "gaps": _step_gaps(rank, step, make_blamer((start, end))),
        "syncs": _step_syncs(rank, start, end),
        "truncated": len(slices) > MAX_TIMELINE_SLICES,
    }


def _step_slices(rank: RankAnalysis, start: int, end: int) -> list[dict]:
    """Host ops and runtime calls of the launching thread, then GPU ops, overlapping the window."""
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
    slices.extend(
        _slices(
            rank.gpu,
            start,
            end,
            origin,
            lambda r: f"GPU {r.device} stream {r.stream}",
            lambda r: "kernel" if r.kind == "kernel" else f"gpu_{r.kind}",
        )
    )
    return slices


def _step_gaps(rank: RankAnalysis, step: int, blame: Callable) -> list[dict]:
    origin = rank.tables.origin_ns
    gaps = rank.gaps[(rank.gaps["step"] == step).to_numpy()]
    return [
        {
            "lane": f"GPU {int(g['device'])}",
            "start_ns": int(g["start_ns"]) - origin,
            "dur_ns": int(g["dur_ns"]),
            "class": g["class"],
            "blame": blame(g),
        }
        for _, g in gaps.iterrows()
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
