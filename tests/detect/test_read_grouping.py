"""Read grouping on hand-built nesting: which calls make one read, and what each read is tied to."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bubblescope.detect.host_syncs import _KIND_OF_OP, _OWN_FRAME_PART, _TAP_FRAME_PART
from bubblescope.detect.read_grouping import group_calls
from bubblescope.trace.nesting import NestingIndex


def _ranges(rows: list[tuple[int, int, str]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "name": pd.Categorical([r[2] for r in rows]),
            "start_ns": np.asarray([r[0] for r in rows], dtype=np.int64),
            "end_ns": np.asarray([r[1] for r in rows], dtype=np.int64),
        }
    )


def _group(calls: list[tuple[int, int, str, int]], ops, frames, own=None, waits=None) -> pd.DataFrame:
    table = pd.DataFrame(
        {
            "name": pd.Categorical([c[2] for c in calls]),
            "tid": pd.Categorical(["7"] * len(calls)),
            "start_ns": np.asarray([c[0] for c in calls], dtype=np.int64),
            "end_ns": np.asarray([c[1] for c in calls], dtype=np.int64),
            "correlation": np.asarray([c[3] for c in calls], dtype=np.int64),
        }
    )
    return group_calls(
        table,
        {"7": NestingIndex(_ranges(ops))},
        {"7": NestingIndex(_ranges(frames))},
        {"7": NestingIndex(_ranges(own))} if own else {},
        pd.Series(waits or {}, dtype=np.int64),
        _OWN_FRAME_PART,
        _TAP_FRAME_PART,
        _KIND_OF_OP,
    )


def test_calls_under_one_op_are_one_read_and_a_driver_call_inside_counts_once() -> None:
    ops = [
        (0, 100, "aten::item"),
        (5, 95, "aten::_local_scalar_dense"),
        (190, 300, "aten::item"),
    ]
    frames = [(0, 1000, "/home/u/run.py(3): main"), (0, 400, "/home/u/run.py(40): step")]
    calls = [
        (35, 85, "cuStreamSynchronize", -1),  # listed first: a driver call inside the runtime call
        (10, 20, "cudaMemcpyAsync", 1),
        (30, 90, "cudaStreamSynchronize", 2),
        (200, 260, "cudaFree", -1),  # implicit synchronizer under aten::item: a read of its own
    ]
    reads = _group(calls, ops, frames, waits={2: 55})
    assert len(reads) == 2
    item, free = reads.iloc[0], reads.iloc[1]
    assert (item["op"], item["inner_op"], item["op_kind_name"]) == (
        "aten::item",
        "aten::_local_scalar_dense",
        "aten::item",
    )
    assert (item["calls"], item["blocked_ns"], item["wait_ns"]) == (2, 10 + 60, 55)
    assert (item["hold_start_ns"], item["start_ns"], item["end_ns"]) == (0, 10, 90)
    assert item["api"] == "cudaStreamSynchronize"
    assert item["site_frame"] == "/home/u/run.py(40): step"
    assert (free["api"], free["hold_start_ns"], free["calls"], free["blocked_ns"]) == ("cudaFree", 200, 1, 60)


def test_own_synchronize_dropped_and_tap_frame_walked_through() -> None:
    frames = [
        (0, 1000, "/home/u/run.py(3): main"),
        (100, 200, "bubblescope/capture/user_reads.py(166): tapped"),
        (300, 400, "bubblescope/capture/window.py(20): drain"),
    ]
    calls = [
        (110, 150, "cudaStreamSynchronize", -1),  # the user's read, through the tap
        (310, 350, "cudaDeviceSynchronize", -1),  # bubblescope's own code
        (510, 550, "cudaDeviceSynchronize", -1),  # under an own-sync annotation
    ]
    reads = _group(calls, [], frames, own=[(500, 600, "bubblescope.own_sync")])
    assert reads["start_ns"].tolist() == [110]
    assert reads["site_frame"].tolist() == ["/home/u/run.py(3): main"]
    assert reads["op"].tolist() == [""]
