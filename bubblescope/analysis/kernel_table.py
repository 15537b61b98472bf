"""The per-kernel table of an analysis (`kernels[]` in `bubblescope.analysis/1`).

One row per kernel name, over the kernels launched inside the step windows of every rank: how often it
ran, its total / mean / median / longest duration, its share of all kernel time, and its count and time
per step. Pure pandas on the trace tables; never imports torch.

Where bytes per step are given (a user's `--bytes-per-token` spread over the whole step is not
per-kernel, so it is not used here) rows could carry achieved bandwidth; today no trace carries
per-kernel bytes, so `achieved_gbps` is present only when a caller passes `bytes_by_kernel`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from bubblescope.trace.kernel_names import CATEGORIES, kernel_category, short_kernel_names
from bubblescope.trace.steps import launch_steps_of

# A trace with thousands of distinct kernel names keeps the JSON bounded; the table shows the largest.
MAX_KERNEL_ROWS = 200


def in_step_kernels(rank: Any) -> pd.DataFrame:
    """[n] kernels launched inside the rank's steps: name, dur_ns."""
    gpu = rank.gpu
    if not len(gpu):
        return pd.DataFrame({"name": [], "dur_ns": []})
    kernels = (gpu["kind"] == "kernel").to_numpy()
    steps = launch_steps_of(gpu, rank.steps)
    keep = kernels & (steps >= 0)
    rows = gpu.loc[keep, ["name", "start_ns", "end_ns"]]
    return pd.DataFrame(
        {
            "name": rows["name"].astype(str).to_numpy(),
            "dur_ns": (rows["end_ns"].to_numpy() - rows["start_ns"].to_numpy()).astype(np.int64),
        }
    )


def kernel_entries(
    ranks: Sequence[Any],
    *,
    bytes_by_kernel: Mapping[str, float] | None = None,
    ceiling_gbps: float | None = None,
) -> list[dict[str, Any]]:
    """Rows of the per-kernel table, largest total time first.

    Args:
        ranks: `analysis.RankAnalysis` objects (each has `gpu` and `steps`).
        bytes_by_kernel: bytes one launch of a kernel moves, by name (optional).
        ceiling_gbps: the device's bandwidth ceiling, for `bandwidth_fraction` (optional).
    Returns:
        [{name, short_name, category, count, total_ns, mean_ns, p50_ns, max_ns, share, count_per_step,
        ns_per_step}] (short name and category: trace/kernel_names.py) plus
        `achieved_gbps` (and `bandwidth_fraction` with a ceiling) for kernels whose bytes are known.
    """
    return kernel_rows(
        [in_step_kernels(rank) for rank in ranks],
        sum(len(rank.steps) for rank in ranks),
        bytes_by_kernel=bytes_by_kernel,
        ceiling_gbps=ceiling_gbps,
    )


def kernel_rows(
    frames: Sequence[pd.DataFrame],
    steps_total: int,
    *,
    bytes_by_kernel: Mapping[str, float] | None = None,
    ceiling_gbps: float | None = None,
) -> list[dict[str, Any]]:
    """`kernel_entries` from each rank's `in_step_kernels` frame (rank order) and the total step count."""
    frames = [f for f in frames if len(f)]
    if not frames or steps_total == 0:
        return []
    kernels = pd.concat(frames, ignore_index=True)
    grouped = kernels.groupby("name", sort=False)["dur_ns"].agg(["size", "sum", "mean", "median", "max"])
    grouped = grouped.sort_values("sum", ascending=False, kind="stable").head(MAX_KERNEL_ROWS)
    all_ns = float(kernels["dur_ns"].sum()) or 1.0
    shorts = short_kernel_names(str(name) for name in grouped.index)
    out = []
    for name, row in grouped.iterrows():
        entry: dict[str, Any] = {
            "name": str(name),
            "short_name": shorts[str(name)],
            "category": kernel_category(str(name)),
            "count": int(row["size"]),
            "total_ns": int(row["sum"]),
            "mean_ns": round(float(row["mean"]), 1),
            "p50_ns": round(float(row["median"]), 1),
            "max_ns": int(row["max"]),
            "share": round(float(row["sum"]) / all_ns, 6),
            "count_per_step": round(int(row["size"]) / steps_total, 4),
            "ns_per_step": round(float(row["sum"]) / steps_total, 1),
        }
        launch_bytes = (bytes_by_kernel or {}).get(str(name))
        if launch_bytes and row["mean"] > 0:
            entry["achieved_gbps"] = round(float(launch_bytes) / float(row["mean"]), 2)
            if ceiling_gbps:
                entry["bandwidth_fraction"] = round(entry["achieved_gbps"] / ceiling_gbps, 4)
        out.append(entry)
    return out


def kernel_category_entries(ranks: Sequence[Any]) -> list[dict[str, Any]]:
    """Kernel time by category (trace/kernel_names.py), over every in-step kernel, largest first.

    Returns:
        [{category, kernels (distinct names), count, total_ns, share, count_per_step, ns_per_step}];
        categories with no
        kernel are left out; [] without kernels.
    """
    return kernel_category_rows([in_step_kernels(rank) for rank in ranks], sum(len(r.steps) for r in ranks))


def kernel_category_rows(frames: Sequence[pd.DataFrame], steps_total: int) -> list[dict[str, Any]]:
    """`kernel_category_entries` from each rank's `in_step_kernels` frame and the total step count."""
    frames = [f for f in frames if len(f)]
    if not frames or steps_total == 0:
        return []
    kernels = pd.concat(frames, ignore_index=True)
    names = pd.Categorical(kernels["name"])
    # One rule evaluation per distinct name, then a take per launch.
    by_name = np.asarray([kernel_category(str(n)) for n in names.categories], dtype=object)
    kernels["category"] = by_name[names.codes]
    grouped = kernels.groupby("category", sort=False).agg(
        kernels=("name", "nunique"), count=("dur_ns", "size"), total_ns=("dur_ns", "sum")
    )
    all_ns = float(grouped["total_ns"].sum()) or 1.0
    order = sorted(grouped.index, key=lambda c: (-int(grouped.loc[c, "total_ns"]), CATEGORIES.index(c)))
    return [
        {
            "category": str(category),
            "kernels": int(grouped.loc[category, "kernels"]),
            "count": int(grouped.loc[category, "count"]),
            "total_ns": int(grouped.loc[category, "total_ns"]),
            "share": round(float(grouped.loc[category, "total_ns"]) / all_ns, 6),
            "count_per_step": round(int(grouped.loc[category, "count"]) / steps_total, 4),
            "ns_per_step": round(float(grouped.loc[category, "total_ns"]) / steps_total, 1),
        }
        for category in order
    ]
