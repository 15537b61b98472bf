"""Detector helper: name what the host was doing during a GPU idle gap, and why a queued op waited.

Heuristic for `host` gaps: the user Python frames and ATen ops on the launching thread that overlap the
gap without enclosing all of it (the work that ran in it), ranked by overlapped ns, top three. When
only enclosing ranges exist (one long Python function), the innermost enclosing user frame is named.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bubblescope.trace.nesting import NestingIndex, is_user_frame, short_site
from bubblescope.trace.tables import category_mask

TOP_BLAME_ENTRIES = 3


class HostBlame:
    """Blame strings for gaps of one rank's host thread.

    Args:
        ops: host op table (cpu_op and user_annotation rows).
        frames: Python frame table.
        tid: the thread that launches GPU work.
        window_ns: only ranges overlapping this [start, end) are kept (default: all).
    """

    def __init__(
        self, ops: pd.DataFrame, frames: pd.DataFrame, tid: str, window_ns: tuple[int, int] | None = None
    ) -> None:
        ops = ops[((ops["tid"] == tid) & (ops["cat"] == "cpu_op")).to_numpy()]
        frames = frames[(frames["tid"] == tid).to_numpy()]
        if window_ns is not None:
            ops = ops[((ops["end_ns"] > window_ns[0]) & (ops["start_ns"] < window_ns[1])).to_numpy()]
            overlaps = (frames["end_ns"] > window_ns[0]) & (frames["start_ns"] < window_ns[1])
            frames = frames[overlaps.to_numpy()]
        frames = frames[category_mask(frames["name"], is_user_frame)]
        frame_index, op_index = NestingIndex(frames), NestingIndex(ops)
        sites = {name: short_site(name) for name in set(frame_index.names.tolist())}
        self._names = np.asarray([sites[n] for n in frame_index.names] + list(op_index.names), dtype=object)
        self._starts = np.concatenate((frame_index.starts, op_index.starts))
        self._ends = np.concatenate((frame_index.ends, op_index.ends))
        self._is_frame = np.arange(len(self._names)) < len(frame_index.starts)
        # Parents in the concatenated numbering, so that nested ranges are not counted twice.
        self._parent = np.concatenate(
            (
                frame_index.parent,
                np.where(op_index.parent >= 0, op_index.parent + len(frame_index.starts), -1),
            )
        )

    def blame(self, start_ns: int, end_ns: int) -> str:
        """'a.py(3): f 12.1us; aten::copy_ 4.0us' for the host work inside [start_ns, end_ns)."""
        overlap = np.minimum(self._ends, end_ns) - np.maximum(self._starts, start_ns)
        encloses = (self._starts <= start_ns) & (self._ends >= end_ns)
        partial = (overlap > 0) & ~encloses
        # Keep the outermost partial ranges: a child of a partially overlapping range is inside it.
        parent_partial = np.zeros(len(partial), dtype=bool)
        has_parent = self._parent >= 0
        parent_partial[has_parent] = partial[self._parent[has_parent]]
        partial &= ~parent_partial
        if partial.any():
            by_name = pd.Series(overlap[partial]).groupby(self._names[partial]).sum()
            top = by_name.sort_values(ascending=False, kind="stable").head(TOP_BLAME_ENTRIES)
            return "; ".join(f"{name} {ns / 1000:.1f}us" for name, ns in top.items())
        enclosing_frames = np.flatnonzero(encloses & self._is_frame)
        if len(enclosing_frames):
            innermost = enclosing_frames[np.argmax(self._starts[enclosing_frames])]
            return f"host in {self._names[innermost]}"
        return "host (no op or frame recorded in the gap)"


def queued_blame(gap_class: str, next_stream: int, graph: bool) -> str:
    """Blame text for `launch` / `dependency` gaps, whose cause is on the device side."""
    if gap_class == "dependency":
        return f"stream {next_stream} waited on another stream or event"
    if gap_class == "launch":
        return "launch latency inside a CUDA graph" if graph else "kernel-to-kernel launch latency"
    return gap_class
