"""Detector: per-stream idle time in Holistic Trace Analysis' three buckets, computed exactly in ns.

For each stream, from its first op's start to its last op's end, each idle interval before op X
(X starts after everything earlier on the stream finished) is
  - host wait    X's launching call started after the stream went idle (the CPU was late),
  - kernel wait  otherwise, when the interval is shorter than 30 µs (launch overhead),
  - other        otherwise (dependencies, syncs, anything unattributed).
HTA does the same per stream but on integer µs, which inflates each decode-scale gap by up to 2 µs;
here the buckets add up exactly to the stream's idle ns.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bubblescope.detect.idle_gaps import device_busy_intervals

KERNEL_WAIT_THRESHOLD_NS = 30_000


def stream_idle(gpu: pd.DataFrame, threshold_ns: int = KERNEL_WAIT_THRESHOLD_NS) -> list[dict[str, int]]:
    """HTA-compatible idle breakdown of every stream of one device.

    Args:
        gpu: correlated GPU ops of one device, sorted by `start_ns`.
        threshold_ns: kernel-wait bound, default 30 µs as in HTA.

    Returns:
        One dict per stream (sorted): stream, busy_ns, idle_ns, host_wait_ns, kernel_wait_ns, other_ns,
        span_ns, ops.
    """
    out: list[dict[str, int]] = []
    for stream, ops in gpu.groupby("stream", sort=True):
        starts = ops["start_ns"].to_numpy()
        ends = ops["end_ns"].to_numpy()
        merged_starts, merged_ends = device_busy_intervals(starts, ends)
        busy_ns = int((merged_ends - merged_starts).sum())
        span_ns = int(ends.max() - starts.min())
        free_at = np.maximum.accumulate(ends)[:-1]
        follows_gap = np.flatnonzero(starts[1:] > free_at) + 1
        gap_ns = starts[follows_gap] - free_at[follows_gap - 1]
        launch_start = ops["launch_start_ns"].to_numpy()[follows_gap]
        host_wait = (launch_start >= 0) & (launch_start > free_at[follows_gap - 1])
        kernel_wait = ~host_wait & (gap_ns < threshold_ns)
        out.append(
            {
                "stream": int(stream),
                "busy_ns": busy_ns,
                "idle_ns": span_ns - busy_ns,
                "host_wait_ns": int(gap_ns[host_wait].sum()),
                "kernel_wait_ns": int(gap_ns[kernel_wait].sum()),
                "other_ns": int(gap_ns[~host_wait & ~kernel_wait].sum()),
                "span_ns": span_ns,
                "ops": len(ops),
            }
        )
    return out
