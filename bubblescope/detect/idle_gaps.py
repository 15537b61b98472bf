"""Detector: GPU idle gaps per device (union over streams), classified by the op that ends each gap.

Heuristic, exact integer-ns arithmetic. The device is busy while any kernel/memcpy/memset runs; a gap
[g0, g1) ends when op X starts at g1. X's launching call (by correlation; a graph replay's kernels all
map to their `cudaGraphLaunch`) decides the class:

    queued   X's launch returned at or before g0 (or X is not the first kernel of its graph replay):
             the work was there; the device waited on latency or on something else
               launch      X is on the stream that was running at g0 (kernel-to-kernel latency,
                           gaps inside a graph: what PDL and fusion remove)
               dependency  X is on another stream (waiting on an event / other stream)
    host-bound  X's launch returned after g0: the host had not issued it yet
               sync        a blocking read returned before X's launch began and the host has not
                           regained its lead since (lost run-ahead, ARCHITECTURE §5): blame that read
               host        otherwise: the host was busy with other work
    outside  the part of any gap outside every step's GPU interval

Gaps are cut at the steps' GPU intervals (`trace.steps.gpu_step_bounds`), not at their host windows:
a step owns the GPU ops launched in its host window, and its GPU interval runs from the end of the
previous step's work to the end of its own. In a synchronous loop the bubble after a read lands in
the step whose kernels it delays; under host run-ahead (step k+1 enqueued before step k ran) GPU time
of step k is counted for step k although it runs during later host windows.

"The host regained its lead" = some op Y launched after the read returned had its launch call
return no later than the device finished the work queued ahead of Y (Y did not wait for the host).

    host  ..[item: sync....]--py--launch(X)......
    GPU   ==k==memcpy|<------ sync gap ------>|==X==
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bubblescope.trace.steps import StepWindows, gpu_step_bounds, gpu_step_index_of, launch_times_ns

GAP_CLASSES = ("sync", "host", "launch", "dependency", "outside")
GAP_COLUMNS = [
    "device",
    "start_ns",
    "end_ns",
    "dur_ns",
    "class",
    "step",
    "read_id",
    "next_op",
    "next_stream",
    "next_row",
]


def device_busy_intervals(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge [start, end) intervals sorted by start into disjoint busy intervals. ([k], [k]) int64."""
    if not len(starts):
        return starts[:0], ends[:0]
    run_end = np.maximum.accumulate(ends)
    new_run = np.ones(len(starts), dtype=bool)
    new_run[1:] = starts[1:] > run_end[:-1]
    run_id = np.cumsum(new_run) - 1
    merged_starts = starts[new_run]
    merged_ends = np.zeros(len(merged_starts), dtype=np.int64)
    np.maximum.at(merged_ends, run_id, run_end)
    return merged_starts, merged_ends


def find_idle_gaps(
    gpu: pd.DataFrame,
    reads: pd.DataFrame,
    steps: StepWindows,
    device: int,
    span_ns: tuple[int, int],
    bounds_ns: np.ndarray | None = None,
) -> pd.DataFrame:
    """Classified idle gaps of one device, split at the steps' GPU interval boundaries.

    Args:
        gpu: correlated GPU ops of this device, sorted by `start_ns`.
        reads: host-blocking reads of this rank (`find_host_syncs`).
        steps: step windows of this rank.
        device: device index (copied into the rows).
        span_ns: [start, end) the device is accounted over; every op lies inside it.
        bounds_ns: [n_steps + 1] `gpu_step_bounds` of this device; computed from `gpu` when None.

    Returns:
        DataFrame with GAP_COLUMNS; the `dur_ns` sum equals span minus busy time.
    """
    starts = gpu["start_ns"].to_numpy()
    ends = gpu["end_ns"].to_numpy()
    free_at = np.concatenate(([span_ns[0]], np.maximum(np.maximum.accumulate(ends), span_ns[0])))
    # A gap precedes op i when it starts after everything before it has finished.
    before = np.flatnonzero(starts > free_at[:-1])
    gap_start = free_at[:-1][before]
    gap_end = starts[before]
    classes, read_ids = _classify(gpu, before, gap_start, reads, free_at[:-1])
    next_ops = gpu["name"].to_numpy()[before]
    next_streams = gpu["stream"].to_numpy()[before]
    tail_start = free_at[-1] if len(starts) else span_ns[0]
    if tail_start < span_ns[1]:
        gap_start = np.append(gap_start, tail_start)
        gap_end = np.append(gap_end, span_ns[1])
        # Nothing ends a trailing gap: the host still had work in the step and queued nothing.
        classes = np.append(classes, "host")
        read_ids = np.append(read_ids, -1)
        next_ops = np.append(next_ops, "")
        next_streams = np.append(next_streams, -1)
        before = np.append(before, -1)
    gaps = pd.DataFrame(
        {
            "start_ns": gap_start.astype(np.int64),
            "end_ns": gap_end.astype(np.int64),
            "class": classes.astype(object),
            "read_id": read_ids.astype(np.int64),
            "next_op": next_ops.astype(object),
            "next_stream": next_streams.astype(np.int64),
            "next_row": before.astype(np.int64),
        }
    )
    if bounds_ns is None:
        bounds_ns = gpu_step_bounds(launch_times_ns(gpu), ends, steps)
    gaps = split_at_steps(gaps, bounds_ns)
    gaps.insert(0, "device", device)
    gaps["dur_ns"] = gaps["end_ns"] - gaps["start_ns"]
    return gaps[GAP_COLUMNS]


def _classify(
    gpu: pd.DataFrame, ending: np.ndarray, gap_start: np.ndarray, reads: pd.DataFrame, free_before: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    launch_end = gpu["launch_end_ns"].to_numpy()
    matched = gpu["launch_row"].to_numpy() >= 0
    inside_replay = gpu["graph"].to_numpy() & ~gpu["first_of_launch"].to_numpy()
    # Y did not wait for the host: its launch returned before the device was free for it.
    ahead = matched & ((launch_end <= free_before) | inside_replay)
    x_end = launch_end[ending]
    queued = ~matched[ending] | inside_replay[ending] | (x_end <= gap_start)
    streams = gpu["stream"].to_numpy()
    running_stream = _stream_running_at(gpu, ending)
    classes = np.where(streams[ending] == running_stream, "launch", "dependency").astype(object)
    read_ids = np.full(len(ending), -1, dtype=np.int64)
    host_bound = ~queued
    if host_bound.any():
        classes[host_bound] = "host"
        if len(reads):
            read_end = reads["end_ns"].to_numpy()
            order = np.argsort(read_end, kind="stable")
            sorted_end = read_end[order]
            # The read must have returned before X's launch began (a copy's own read launches X).
            x_begin = gpu["launch_start_ns"].to_numpy()[ending][host_bound]
            k = np.searchsorted(sorted_end, x_begin, side="right") - 1
            has_read = k >= 0
            last_read_end = np.where(has_read, sorted_end[np.maximum(k, 0)], 0)
            ahead_ends = np.sort(launch_end[ahead])
            regained = (
                np.searchsorted(ahead_ends, x_end[host_bound], side="left")
                - np.searchsorted(ahead_ends, last_read_end, side="left")
            ) > 0
            is_sync = has_read & ~regained
            idx = np.flatnonzero(host_bound)[is_sync]
            classes[idx] = "sync"
            read_ids[idx] = reads["read_id"].to_numpy()[order][k[is_sync]]
    return classes, read_ids


def _stream_running_at(gpu: pd.DataFrame, ending: np.ndarray) -> np.ndarray:
    """Stream of the op whose end made the device go idle before each gap (-2 for a leading gap)."""
    ends = gpu["end_ns"].to_numpy()
    if not len(ends):
        return np.zeros(0, dtype=np.int64)
    run_max = np.maximum.accumulate(ends)
    # argmax of the running max: the row that set it, found via where the running max changes.
    is_new_max = np.ones(len(ends), dtype=bool)
    is_new_max[1:] = run_max[1:] > run_max[:-1]
    setter = np.maximum.accumulate(np.where(is_new_max, np.arange(len(ends)), 0))
    prev = ending - 1
    streams = gpu["stream"].to_numpy()
    return np.where(prev >= 0, streams[setter[np.maximum(prev, 0)]], -2)


def split_at_steps(gaps: pd.DataFrame, bounds_ns: np.ndarray) -> pd.DataFrame:
    """Cut gaps at the steps' GPU interval bounds; pieces outside [B_0, E_last) become `outside`.

    Args:
        gaps: gap rows with `start_ns`, `end_ns`, `class`, `read_id`.
        bounds_ns: [n_steps + 1] `gpu_step_bounds` of the device.
    """
    if not len(gaps):
        return gaps.assign(step=np.zeros(0, dtype=np.int64))
    cuts = np.unique(bounds_ns)
    if not len(cuts):
        cuts = np.zeros(1, dtype=np.int64)
    g0 = gaps["start_ns"].to_numpy()
    g1 = gaps["end_ns"].to_numpy()
    first_cut = np.searchsorted(cuts, g0, side="right")
    last_cut = np.searchsorted(cuts, g1, side="left")
    n_cuts = np.maximum(last_cut - first_cut, 0)
    pieces = n_cuts + 1
    owner = np.repeat(np.arange(len(gaps)), pieces)
    piece_no = np.arange(len(owner)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    cut_at = first_cut[owner] + piece_no
    piece_start = np.where(piece_no == 0, g0[owner], cuts[np.minimum(cut_at - 1, len(cuts) - 1)])
    piece_end = np.where(piece_no == n_cuts[owner], g1[owner], cuts[np.minimum(cut_at, len(cuts) - 1)])
    out = gaps.iloc[owner].reset_index(drop=True)
    out["start_ns"] = piece_start
    out["end_ns"] = piece_end
    step = gpu_step_index_of(piece_start, bounds_ns)
    out["step"] = step
    outside = step < 0
    out.loc[outside, "class"] = "outside"
    out.loc[outside, "read_id"] = -1
    return out[out["end_ns"] > out["start_ns"]].reset_index(drop=True)
