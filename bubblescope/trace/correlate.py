"""Tie each GPU op to the host call that launched it, through `args.correlation`.

A graph replay is one `cudaGraphLaunch` / `hipGraphLaunch` whose correlation id every kernel of the
replay carries, so all of them map to that one call; `first_of_launch` marks the earliest op of each
launch. Call names come from `trace.runtime_names` (CUDA and HIP).

An op whose call precedes the trace (a graph replay, or kernels, queued before tracing began) has a
correlation id below every call the trace holds (ids grow with each call): `before_trace` marks it, so
that it is charged to no step (`steps.launch_times_ns`) instead of being placed by its own start.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bubblescope.trace import runtime_names as rt
from bubblescope.trace.tables import category_labels, category_mask

# Kept for importers; the table lives in `trace.runtime_names`.
GRAPH_LAUNCH_NAMES = rt.GRAPH_LAUNCHES


def correlate_launches(gpu: pd.DataFrame, runtime: pd.DataFrame) -> pd.DataFrame:
    """Add launch columns to the GPU op table (sorted by start).

    Args:
        gpu: GPU op table, one row per kernel/memcpy/memset, sorted by `start_ns`.
        runtime: runtime/driver call table.

    Returns:
        `gpu` with `launch_row` (row in `runtime`, -1 when unmatched), `launch_start_ns`,
        `launch_end_ns` (-1 when unmatched), `launch_tid`, `launch_name`, `graph` (launched by a graph
        launch), `first_of_launch` and `before_trace` (launched before the trace began).
    """
    # Shallow: only new columns are added, and pandas' copy-on-write keeps `gpu` itself unchanged.
    out = gpu.copy(deep=False)
    n_ops = len(out)
    runtime_corr = runtime["correlation"].to_numpy()
    valid = runtime_corr >= 0
    rows = np.flatnonzero(valid)
    # Correlation ids are unique per call; keep the first should a writer ever repeat one.
    keys, first = np.unique(runtime_corr[rows], return_index=True)
    rows = rows[first]
    op_corr = out["correlation"].to_numpy()
    pos = np.searchsorted(keys, op_corr)
    pos_clipped = np.minimum(pos, max(len(keys) - 1, 0))
    matched = (len(keys) > 0) & (op_corr >= 0)
    if len(keys):
        matched = matched & (keys[pos_clipped] == op_corr)
    launch_row = np.where(matched, rows[pos_clipped] if len(keys) else -1, -1)
    out["launch_row"] = launch_row.astype(np.int64)
    starts = runtime["start_ns"].to_numpy()
    ends = runtime["end_ns"].to_numpy()
    safe = np.maximum(launch_row, 0)
    has = launch_row >= 0
    out["launch_start_ns"] = np.where(has, starts[safe] if len(starts) else -1, -1)
    out["launch_end_ns"] = np.where(has, ends[safe] if len(ends) else -1, -1)
    names = category_labels(runtime["name"])
    tids = category_labels(runtime["tid"])
    out["launch_name"] = np.where(has, names[safe] if len(names) else "", "")
    out["launch_tid"] = np.where(has, tids[safe] if len(tids) else "", "")
    # Decided once per distinct runtime name, then taken per op.
    is_graph_call = category_mask(runtime["name"], rt.is_graph_launch)
    out["graph"] = has & is_graph_call[safe] if len(is_graph_call) else np.zeros(n_ops, dtype=bool)
    first_flag = np.ones(n_ops, dtype=bool)
    if n_ops:
        # Ops are sorted by start, so the first row of each correlation group starts first.
        dup = pd.Series(op_corr).duplicated(keep="first").to_numpy() & has
        first_flag = ~dup
    out["first_of_launch"] = first_flag
    # Without calls nothing proves an op came before them.
    first_call = int(keys[0]) if len(keys) else -1
    out["before_trace"] = ~has & (op_corr >= 0) & (op_corr < first_call)
    return out


def launch_counts(runtime: pd.DataFrame) -> dict[str, int]:
    """How many graph launches and kernel launches the host made (for plausibility checks).

    Kernel launches made while their thread was capturing a graph (between a stream begin-capture and
    end-capture call) run only on replay: they are counted apart, as `captured_launches`.
    """
    names = runtime["name"]
    graph = int(category_mask(names, rt.is_graph_launch).sum())
    is_kernel = category_mask(names, rt.is_kernel_launch)
    captured = np.zeros(len(runtime), dtype=bool)
    begins = category_mask(names, rt.CAPTURE_BEGINS.__contains__)
    if begins.any():
        ends = category_mask(names, rt.CAPTURE_ENDS.__contains__)
        tids = runtime["tid"].astype(str).to_numpy()
        starts = runtime["start_ns"].to_numpy()
        for tid in np.unique(tids[begins]).tolist():
            mine = tids == tid
            # Depth of open captures at each call: +1 after a begin, -1 after an end, in time order.
            order = np.flatnonzero(mine)[np.argsort(starts[mine], kind="stable")]
            depth = np.cumsum(begins[order].astype(np.int64) - ends[order].astype(np.int64))
            captured[order] = depth > 0
    return {
        "graph_launches": graph,
        "kernel_launches": int((is_kernel & ~captured).sum()),
        "captured_launches": int((is_kernel & captured).sum()),
    }
