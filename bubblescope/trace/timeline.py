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
    blame = make_blamer((start, end))
    origin = rank.tables.origin_ns
    slices: list[dict] = []
    host = rank.tables.ops[(rank.tables.ops["cat"] == "cpu_op").to_numpy()]
    if rank.host_tid:
        host = host[(host["tid"] == rank.host_tid).to_numpy()]
        runtime = rank.tables.runtime[(rank.tables.runtime["tid"] == rank.host_tid).to_numpy()]
    else:
        runtime = rank.tables.runtime.iloc[:0]
    for table, cat in ((host, "cpu_op"), (runtime, "cuda_runtime")):
        slices.extend(_slices(table, start, end, origin, lambda _row: "host", lambda _row, c=cat: c))
    gpu = rank.gpu
    slices.extend(
        _slices(
            gpu,
            start,
            end,
            origin,
            lambda r: f"GPU {r.device} stream {r.stream}",
            lambda r: "kernel" if r.kind == "kernel" else f"gpu_{r.kind}",
        )
    )
    truncated = len(slices) > MAX_TIMELINE_SLICES
    lanes = [{"lane": "host", "kind": "host"}] + [
        {"lane": f"GPU {d} stream {s}", "kind": "gpu"}
        for d, s in sorted(set(zip(gpu["device"].tolist(), gpu["stream"].tolist(), strict=True)))
    ]
    gaps = rank.gaps[(rank.gaps["step"] == step).to_numpy()]
    reads = (
        rank.reads[((rank.reads["end_ns"] > start) & (rank.reads["start_ns"] < end)).to_numpy()]
        if len(rank.reads)
        else rank.reads
    )
    return {
        "step": step,
        "rank": rank.tables.rank,
        "start_ns": start - origin,
        "dur_ns": end - start,
        "lanes": lanes,
        "slices": slices[:MAX_TIMELINE_SLICES],
        "gaps": [
            {
                "lane": f"GPU {int(g['device'])}",
                "start_ns": int(g["start_ns"]) - origin,
                "dur_ns": int(g["dur_ns"]),
                "class": g["class"],
                "blame": blame(g),
            }
            for _, g in gaps.iterrows()
        ],
        "syncs": [
            {
                "start_ns": int(r.start_ns) - origin,
                "dur_ns": int(r.end_ns - r.start_ns),
                "site": r.site,
                "op": r.op,
            }
            for r in reads.itertuples(index=False)
        ],
        "truncated": truncated,
    }


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
