"""The host op table of an analysis (`host_ops[]` in `bubblescope.analysis/1`), as torch.profiler's
`key_averages()` shows it: one row per name, with calls, self and total time, and both per step.

Rows are the host ranges that start inside a step window: ATen ops (`cpu_op`), `record_function`
ranges (`user_annotation`, except the step annotations themselves) and CUDA runtime / driver calls
(`cudaLaunchKernel`, `cudaStreamSynchronize`, ...). Python frames are not rows. A range's *total* is its
duration; its *self* time is the total less the totals of the ranges directly nested in it on the same
thread (so `aten::item`'s self time leaves out the `cudaStreamSynchronize` it waits in). As in
`key_averages`, a name nested in itself (`aten::sum` in `aten::sum`) counts both ranges in its total.

Pure numpy/pandas on the trace tables, one nesting pass per thread; never imports torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from bubblescope.trace.nesting import nesting_parents
from bubblescope.trace.steps import step_index_of
from bubblescope.trace.tables import category_labels

# A trace with thousands of distinct op names keeps the JSON bounded; the table keeps the largest self times.
MAX_HOST_OP_ROWS = 200


def _host_ranges(rank: Any) -> pd.DataFrame:
    """One rank's host ranges: name, kind (op / annotation / runtime), tid, start_ns, end_ns."""
    ops, runtime = rank.tables.ops, rank.tables.runtime
    parts = []
    if len(ops):
        kinds = np.where(ops["cat"].astype(str).to_numpy() == "user_annotation", "annotation", "op")
        parts.append((category_labels(ops["name"]), kinds.astype(object), ops))
    if len(runtime):
        parts.append(
            (category_labels(runtime["name"]), np.full(len(runtime), "runtime", dtype=object), runtime)
        )
    if not parts:
        return pd.DataFrame({"name": [], "kind": [], "tid": [], "start_ns": [], "end_ns": []})
    frame = pd.DataFrame(
        {
            "name": np.concatenate([names for names, _, _ in parts]),
            "kind": np.concatenate([kinds for _, kinds, _ in parts]),
            "tid": np.concatenate([table["tid"].astype(str).to_numpy() for _, _, table in parts]),
            "start_ns": np.concatenate([table["start_ns"].to_numpy(np.int64) for _, _, table in parts]),
            "end_ns": np.concatenate([table["end_ns"].to_numpy(np.int64) for _, _, table in parts]),
        }
    )
    # The step annotations are the windows themselves: a row for each would only repeat the step time.
    step_names = set(rank.steps.names)
    is_step = (frame["kind"].to_numpy() == "annotation") & frame["name"].isin(step_names).to_numpy()
    return frame[~is_step].reset_index(drop=True)


def self_times_ns(ranges: pd.DataFrame) -> np.ndarray:
    """[n] self time of each range: its duration less its direct children's on the same thread (>= 0)."""
    n = len(ranges)
    starts = ranges["start_ns"].to_numpy(np.int64)
    ends = ranges["end_ns"].to_numpy(np.int64)
    tids = pd.Categorical(ranges["tid"]).codes
    order = np.lexsort((-ends, starts, tids))
    durations = (ends - starts)[order]
    parent = np.full(n, -1, dtype=np.int64)
    bounds = np.flatnonzero(np.diff(tids[order], prepend=-1, append=-2))
    for first, stop in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        local = nesting_parents(starts[order][first:stop], ends[order][first:stop])
        parent[first:stop] = np.where(local >= 0, local + first, -1)
    has_parent = parent >= 0
    children_ns = np.bincount(parent[has_parent], weights=durations[has_parent], minlength=n)
    self_sorted = np.maximum(durations - children_ns.astype(np.int64), 0)
    out = np.empty(n, dtype=np.int64)
    out[order] = self_sorted
    return out


def host_op_entries(ranks: Sequence[Any]) -> list[dict[str, Any]]:
    """Rows of the host op table, largest self time first (at most MAX_HOST_OP_ROWS).

    Args:
        ranks: `analysis.RankAnalysis` objects (each has `tables` and `steps`).
    Returns:
        [{name, kind, calls, self_ns, total_ns, calls_per_step, self_ns_per_step, total_ns_per_step,
        self_share}] over the ranges that start inside a step; `self_share` is of all rows' self time.
    """
    return host_op_rows([host_op_sums(rank) for rank in ranks], sum(len(rank.steps) for rank in ranks))


def host_op_sums(rank: Any) -> pd.DataFrame:
    """One rank's in-step host ranges summed per (name, kind), in first-seen order: calls, self_ns,
    total_ns. Summing these over ranks gives the same table as summing all ranges (integer sums)."""
    ranges = _host_ranges(rank)
    if len(ranges):
        ranges["self_ns"] = self_times_ns(ranges)
        ranges["total_ns"] = ranges["end_ns"] - ranges["start_ns"]
        ranges = ranges[step_index_of(ranges["start_ns"].to_numpy(), rank.steps) >= 0]
    if not len(ranges):
        return pd.DataFrame({"name": [], "kind": [], "calls": [], "self_ns": [], "total_ns": []})
    return (
        ranges.groupby(["name", "kind"], sort=False)
        .agg(calls=("self_ns", "size"), self_ns=("self_ns", "sum"), total_ns=("total_ns", "sum"))
        .reset_index()
    )


def host_op_rows(sums: Sequence[pd.DataFrame], steps_total: int) -> list[dict[str, Any]]:
    """`host_op_entries` from each rank's `host_op_sums` (rank order) and the total step count."""
    frames = [f for f in sums if len(f)]
    if not frames or steps_total == 0:
        return []
    ranges = pd.concat(frames, ignore_index=True)
    grouped = ranges.groupby(["name", "kind"], sort=False).agg(
        calls=("calls", "sum"), self_ns=("self_ns", "sum"), total_ns=("total_ns", "sum")
    )
    grouped = grouped.reset_index().sort_values(["self_ns", "total_ns"], ascending=False, kind="stable")
    all_self_ns = float(grouped["self_ns"].sum()) or 1.0
    return [
        {
            "name": str(row.name),
            "kind": str(row.kind),
            "calls": int(row.calls),
            "self_ns": int(row.self_ns),
            "total_ns": int(row.total_ns),
            "calls_per_step": round(int(row.calls) / steps_total, 4),
            "self_ns_per_step": round(int(row.self_ns) / steps_total, 1),
            "total_ns_per_step": round(int(row.total_ns) / steps_total, 1),
            "self_share": round(int(row.self_ns) / all_self_ns, 6),
        }
        for row in grouped.head(MAX_HOST_OP_ROWS).itertuples(index=False)
    ]
