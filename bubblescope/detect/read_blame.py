"""Detector helper: what a blocking read costs, counterfactual and bounded (issue 14 §1; used by
`detect.idle_gaps` to turn host-bound pieces into `sync` or `host`).

A blocking read R holds the host over [r0, r1]: r0 the
start of the outermost user-visible blocking call (`aten::item`, `aten::to`, or the runtime call when
there is none), r1 its last blocking call's end. R *drains* the device when the device runs out of
queued work (a host-bound piece starts) at d with r0 <= d <= r1. Its lost lead is
L = min(d - r0, blocked_ns): the GPU work the host had queued ahead when it stopped to wait, and never
more than the host time the read blocked. A read that begins while the device is already drained has
L = 0 and causes no `sync` idle (the host was late for other reasons: `host`); so does a read during
which the device never drains (the queue outlived the wait).

After a draining read, host-bound idle is `sync`, blamed on R, up to L in total across the pieces
that follow, until the host has work queued ahead again (an op launched after r1 was enqueued before
the device was free for it) or a later read holds the host while the device drains (even one that
began on a drained device, whose own copy drained it again: it re-synchronises host and device, so
the idle after it would be there without R); the rest is `host`. The drain may be up to the trace's
proven GPU clock lag after r1 (`clock_skew_ns`: a device synchronize returned before ops it waited
for "ended"; seen on ROCm). Had R not blocked, the host would have been L further ahead, so fixing R
can hide at most L: a read's `bubble_ns` (its `sync` idle) is the expected saving if it is fixed, and
bubble_ns <= L <= blocked_ns always.

    1. draining read: the queue (L) runs out while the host waits; idle after d is sync up to L
       host   --launch--[aten::item r0 ....... sync call ....... r1]--python--launch(X)--
       GPU    ==k1=====k2=====memcpy| d                                        |==X==
                                    |<-- sync (<= L = d - r0) -->|<-- host -->|

    2. non-draining read: the device still has queued work when the wait returns: no sync idle
       host   --launch x3--[event sync r0 ... r1]--launch--launch--
       GPU    ==k1=====k2=====k3==========k4=====k5===   (no gap while R holds the host)

    3. host-bound loop after a read: the budget L is spent across the following host-bound gaps,
       the remainder is host (DataLoader, Python, launch overhead)
       host   [read r0..r1]--python--launch--python--launch--python--launch--
       GPU    ==k== d|sync L1|==a==|sync L2|==b==|  host  |==c==    L1 + L2 = L
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bubblescope.trace import runtime_names as rt
from bubblescope.trace.steps import launch_times_ns

# GPU/host clock disagreement seen on ROCm traces is µs (7.5 µs on the MI300X Qwen trace).
MAX_CLOCK_SKEW_NS = 100_000
# Class of host-bound pieces before sync/host is decided (never in the output).
HOST_BOUND = "host-bound"
_NONE = np.iinfo(np.int64).max


def clock_skew_ns(gpu: pd.DataFrame, reads: pd.DataFrame) -> int:
    """How far the GPU clock runs behind the host clock, as the trace itself proves it: a device-wide
    synchronize returns only after every op launched before it ended, so an op that ends after such a
    call returned shows the skew. 0 when no call proves any (the usual case on CUDA).

    Args:
        reads: calls with `api`, `start_ns`, `end_ns`: the reads, or every device-wide synchronize
            (`idle_gaps.device_sync_calls`; the profiler's own stop synchronize proves the lag too).
    """
    if not len(reads) or not len(gpu):
        return 0
    device_wide = reads["api"].astype(str).isin(rt.DEVICE_SYNCHRONIZE).to_numpy()
    if not device_wide.any():
        return 0
    launch_ns = launch_times_ns(gpu)
    order = np.argsort(launch_ns, kind="stable")
    latest_end = np.maximum.accumulate(gpu["end_ns"].to_numpy()[order])
    starts = reads["start_ns"].to_numpy()[device_wide].astype(np.int64)
    k = np.searchsorted(launch_ns[order], starts, side="left") - 1
    late = np.where(k >= 0, latest_end[np.maximum(k, 0)] - reads["end_ns"].to_numpy()[device_wide], 0)
    # More than MAX_CLOCK_SKEW_NS is not clock skew but a synchronize of another device: ignored.
    late = late[late <= MAX_CLOCK_SKEW_NS]
    return int(max(late.max(), 0)) if len(late) else 0


def lost_leads(reads: pd.DataFrame, host_bound: pd.DataFrame, skew_ns: int = 0) -> pd.DataFrame:
    """Per read: the drain d in its hold [r0, r1 + skew] (`redrain_ns`, -1 if none), and, when the
    device was not already drained at r0, `drain_ns` = d and lost lead L = min(d - r0, blocked_ns)
    (else -1 and 0)."""
    if not len(reads):
        columns = ("read_id", "drain_ns", "redrain_ns", "lead_ns", "start_ns", "end_ns")
        return pd.DataFrame({c: np.zeros(0, dtype=np.int64) for c in columns})
    r0 = reads["hold_start_ns"].to_numpy().astype(np.int64)
    r1 = reads["end_ns"].to_numpy().astype(np.int64)
    blocked = reads["blocked_ns"].to_numpy().astype(np.int64)
    h0 = host_bound["start_ns"].to_numpy()
    h1 = host_bound["end_ns"].to_numpy()
    inside = np.searchsorted(h0, r0, side="right") - 1
    safe = np.maximum(inside, 0)
    # The device was already out of work when the read began: it lost no lead.
    drained_before = (
        (inside >= 0) & (h0[safe] <= r0) & (r0 < h1[safe]) if len(h0) else np.zeros(len(r0), bool)
    )
    # The first drain after r0: the read's own copy may drain the device again although it began on
    # a drained device; that still re-synchronises the host with the device.
    nxt = np.searchsorted(h0, r0, side="left")
    nxt = np.where(drained_before, inside + 1, nxt)
    has_next = nxt < len(h0)
    d = np.where(has_next, h0[np.minimum(nxt, max(len(h0) - 1, 0))] if len(h0) else 0, -1)
    in_hold = has_next & (d >= r0) & (d <= r1 + skew_ns)
    drains = ~drained_before & in_hold
    lead = np.where(drains, np.minimum(np.maximum(d, r0) - r0, blocked), 0)
    return pd.DataFrame(
        {
            "read_id": reads["read_id"].to_numpy().astype(np.int64),
            "drain_ns": np.where(drains, d, -1).astype(np.int64),
            "redrain_ns": np.where(in_hold, d, -1).astype(np.int64),
            "lead_ns": np.maximum(lead, 0).astype(np.int64),
            "start_ns": r0,
            "end_ns": r1,
        }
    )


def regain_times(gpu: pd.DataFrame) -> np.ndarray:
    """Sorted launch-return times of ops enqueued ahead: the first op of a launch whose launch call
    returned before the device was free for it. From then on the host leads again. [k] int64."""
    if not len(gpu):
        return np.zeros(0, dtype=np.int64)
    ends = gpu["end_ns"].to_numpy()
    free_before = np.concatenate(([np.iinfo(np.int64).min], np.maximum.accumulate(ends)[:-1]))
    launch_end = gpu["launch_end_ns"].to_numpy()
    ahead = (
        (gpu["launch_row"].to_numpy() >= 0) & gpu["first_of_launch"].to_numpy() & (launch_end <= free_before)
    )
    return np.sort(launch_end[ahead])


def assign_sync(pieces: pd.DataFrame, leads: pd.DataFrame, regain_ns: np.ndarray) -> pd.DataFrame:
    """Turn host-bound pieces into `sync` (up to each draining read's lead, in time order) and `host`."""
    classes = pieces["class"].to_numpy()
    host_bound = classes == HOST_BOUND
    drains = leads[(leads["lead_ns"] > 0).to_numpy()].sort_values("drain_ns", kind="stable")
    sync_ns = np.zeros(len(pieces), dtype=np.int64)
    read_of = np.full(len(pieces), -1, dtype=np.int64)
    if len(drains) and host_bound.any():
        d = drains["drain_ns"].to_numpy()
        redrains = np.unique(leads["redrain_ns"].to_numpy())
        seg_end = _segment_ends(drains, redrains[redrains >= 0], regain_ns)
        idx = np.flatnonzero(host_bound)
        a = pieces["start_ns"].to_numpy()[idx]
        dur = (pieces["end_ns"].to_numpy() - pieces["start_ns"].to_numpy())[idx]
        k = np.searchsorted(d, a, side="right") - 1
        valid = (k >= 0) & (a < seg_end[np.maximum(k, 0)])
        spend = np.where(valid, dur, 0)
        before = np.cumsum(spend) - spend
        # Budget already spent in the same read's earlier pieces: prefix sum since its first piece.
        group = np.where(valid, k, -1)
        first_of_group = np.concatenate(([True], group[1:] != group[:-1]))
        base = np.maximum.accumulate(np.where(first_of_group, before, 0))
        lead = drains["lead_ns"].to_numpy()[np.maximum(k, 0)]
        share = np.where(valid, np.clip(lead - (before - base), 0, dur), 0)
        sync_ns[idx] = share
        read_of[idx] = np.where(share > 0, drains["read_id"].to_numpy()[np.maximum(k, 0)], -1)
    return _split_sync(pieces, host_bound, sync_ns, read_of)


def _segment_ends(drains: pd.DataFrame, redrains_ns: np.ndarray, regain_ns: np.ndarray) -> np.ndarray:
    """Where each draining read's blame stops: the host leads again after the read returned (an op
    enqueued before the device was free for it), or a later read holds the host while the device
    drains (it re-synchronises host and device: without this read that idle would be there anyway).
    [n_drains] int64."""
    r1 = drains["end_ns"].to_numpy()
    d = drains["drain_ns"].to_numpy()
    regained = np.full(len(r1), _NONE, dtype=np.int64)
    if len(regain_ns):
        k = np.searchsorted(regain_ns, r1, side="left")
        regained = np.where(k < len(regain_ns), regain_ns[np.minimum(k, len(regain_ns) - 1)], _NONE)
    next_drain = np.full(len(d), _NONE, dtype=np.int64)
    if len(redrains_ns):
        j = np.searchsorted(redrains_ns, d, side="right")
        next_drain = np.where(j < len(redrains_ns), redrains_ns[np.minimum(j, len(redrains_ns) - 1)], _NONE)
    return np.minimum(regained, next_drain).astype(np.int64)


def _split_sync(
    pieces: pd.DataFrame, host_bound: np.ndarray, sync_ns: np.ndarray, read_of: np.ndarray
) -> pd.DataFrame:
    """Pieces with 0 < sync < dur become a sync piece then a host piece; classes finalised."""
    dur = (pieces["end_ns"] - pieces["start_ns"]).to_numpy()
    partial = host_bound & (sync_ns > 0) & (sync_ns < dur)
    repeat = np.where(partial, 2, 1)
    owner = np.repeat(np.arange(len(pieces)), repeat)
    second = np.zeros(len(owner), dtype=bool)
    second[1:] = owner[1:] == owner[:-1]
    out = pieces.iloc[owner].reset_index(drop=True)
    cut = out["start_ns"].to_numpy() + sync_ns[owner]
    starts = out["start_ns"].to_numpy().copy()
    ends = out["end_ns"].to_numpy().copy()
    first_of_partial = partial[owner] & ~second
    ends[first_of_partial] = cut[first_of_partial]
    starts[second] = cut[second]
    is_sync = host_bound[owner] & (sync_ns[owner] > 0) & ~second
    classes = out["class"].to_numpy().copy()
    classes[host_bound[owner]] = "host"
    classes[is_sync] = "sync"
    out["start_ns"], out["end_ns"], out["class"] = starts, ends, classes
    out["read_id"] = np.where(is_sync, read_of[owner], -1).astype(np.int64)
    return out
