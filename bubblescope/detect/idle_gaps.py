"""Detector: GPU idle gaps per device (union over streams), classified, with bounded blame on reads.

Heuristic, exact integer-ns arithmetic. The device is busy while any kernel/memcpy/memset runs; a gap
[g0, g1) ends when op X starts at g1. X's launching call (by correlation; a graph replay's kernels all
map to their graph launch) returned at x_r. The gap is cut at x_r when g0 < x_r < g1:

    host-bound  [g0, min(x_r, g1)): the host had not issued X yet
                  sync   the share a draining read R is blamed for (below), at most its lost lead
                  host   the rest: the host was busy with other work
    queued      [max(x_r, g0), g1), and the whole gap when X is not the first kernel of its graph
                replay or had no launching call in the trace: the work was there, the device waited
                  launch      X is on the stream that was running at g0 (kernel-to-kernel latency,
                              gaps inside a graph: what PDL and fusion remove)
                  dependency  X is on another stream (it waited on an event / another stream), or
                              X's stream had been made to wait on an event (`cudaStreamWaitEvent` /
                              `hipStreamWaitEvent` seen between the stream's previous launch and
                              X's; the call is named), or X sat queued longer than 1 ms
                              (QUEUED_LAUNCH_MAX_NS: no launch takes that long; a graph's hidden
                              cross-stream edge, another device, an op launched before tracing)
    outside     the part of any gap outside every step's GPU interval; also the leading gap before
                a first op whose launch is not in the trace (it was queued before tracing began)

What a read costs (counterfactual, bounded). A blocking read R holds the host over [r0, r1]: r0 the
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
for "ended"; seen on ROCm). Had R not blocked, the host
would have been L further ahead, so fixing R can hide at most L: a read's `bubble_ns` (its `sync`
idle) is the expected saving if it is fixed, and bubble_ns <= L <= blocked_ns always.

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

Gaps are cut at the steps' GPU intervals (`trace.steps.gpu_step_bounds`), not at their host windows:
a step owns the GPU ops launched in its host window, and its GPU interval runs from the end of the
previous step's work to the end of its own.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bubblescope.trace import runtime_names as rt
from bubblescope.trace.steps import StepWindows, gpu_step_bounds, gpu_step_index_of, launch_times_ns
from bubblescope.trace.tables import category_mask

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
    "wait_api",
    "wait_call_ns",
]
# Kernel-to-kernel and graph launch latency is µs (tens of µs for a graph's first node); an op queued
# longer than this waited on something else.
QUEUED_LAUNCH_MAX_NS = 1_000_000
# GPU/host clock disagreement seen on ROCm traces is µs (7.5 µs on the MI300X Qwen trace).
MAX_CLOCK_SKEW_NS = 100_000
# Marker for host-bound pieces before sync/host is decided.
_HOST_BOUND = "host-bound"
_NONE = np.iinfo(np.int64).max


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


def unlaunched_lead_ns(gpu: pd.DataFrame) -> int | None:
    """Start of the device's first op when its launch is not in the trace (queued before tracing
    began): idle before it is not attributable. None otherwise."""
    if not len(gpu) or int(gpu["launch_row"].iloc[0]) >= 0:
        return None
    return int(gpu["start_ns"].iloc[0])


def find_idle_gaps(
    gpu: pd.DataFrame,
    reads: pd.DataFrame,
    steps: StepWindows,
    device: int,
    span_ns: tuple[int, int],
    bounds_ns: np.ndarray | None = None,
    stream_waits: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Classified idle gaps of one device (see `find_idle_gaps_and_leads`)."""
    return find_idle_gaps_and_leads(gpu, reads, steps, device, span_ns, bounds_ns, stream_waits)[0]


def find_idle_gaps_and_leads(
    gpu: pd.DataFrame,
    reads: pd.DataFrame,
    steps: StepWindows,
    device: int,
    span_ns: tuple[int, int],
    bounds_ns: np.ndarray | None = None,
    stream_waits: pd.DataFrame | None = None,
    spent_ns: pd.Series | None = None,
) -> tuple[pd.DataFrame, pd.Series]:
    """Classified idle pieces of one device, split at x_r and at the steps' GPU interval bounds.

    Args:
        gpu: correlated GPU ops of this device, sorted by `start_ns`.
        reads: host-blocking reads of this rank (`find_host_syncs`: read_id, hold_start_ns, end_ns,
            blocked_ns).
        steps: step windows of this rank.
        device: device index (copied into the rows).
        span_ns: [start, end) the device is accounted over; every op lies inside it.
        bounds_ns: [n_steps + 1] `gpu_step_bounds` of this device; computed from `gpu` when None.
        stream_waits: stream-wait calls (`stream_wait_calls`): stream (-1 unknown), tid, start_ns,
            name; names the wait a `dependency` piece waited on. Default None.
        spent_ns: read_id -> sync ns already blamed on the read on other devices of the rank; a
            read's blame over all devices stays within its largest lost lead. Default None.

    Returns:
        (gaps with GAP_COLUMNS, the `dur_ns` sum equal to span minus busy time;
         lost lead L in ns per read_id on this device, 0 for a read that did not drain it).
    """
    pieces, host_bound = _raw_pieces(gpu, span_ns, stream_waits)
    leads = _lost_leads(reads, pieces[host_bound], clock_skew_ns(gpu, reads))
    if bounds_ns is None:
        lead_ns = unlaunched_lead_ns(gpu)
        bounds_ns = gpu_step_bounds(launch_times_ns(gpu), gpu["end_ns"].to_numpy(), steps, lead_ns)
    pieces = split_at_steps(pieces, bounds_ns)
    budget = leads
    if spent_ns is not None and len(leads):
        spent = leads["read_id"].map(spent_ns).fillna(0).to_numpy().astype(np.int64)
        budget = leads.assign(lead_ns=np.maximum(leads["lead_ns"].to_numpy() - spent, 0))
    pieces = _assign_sync(pieces, budget, _regain_times(gpu))
    pieces.insert(0, "device", device)
    pieces["dur_ns"] = pieces["end_ns"] - pieces["start_ns"]
    lead_series = pd.Series(leads["lead_ns"].to_numpy(), index=leads["read_id"].to_numpy(), dtype=np.int64)
    return pieces[GAP_COLUMNS], lead_series


def _raw_pieces(
    gpu: pd.DataFrame, span_ns: tuple[int, int], stream_waits: pd.DataFrame | None
) -> tuple[pd.DataFrame, np.ndarray]:
    """Gaps cut at x_r into host-bound and queued pieces, time-ordered; and the host-bound mask."""
    starts = gpu["start_ns"].to_numpy()
    ends = gpu["end_ns"].to_numpy()
    free_at = np.concatenate(([span_ns[0]], np.maximum(np.maximum.accumulate(ends), span_ns[0])))
    # A gap precedes op i when it starts after everything before it has finished.
    before = np.flatnonzero(starts > free_at[:-1])
    g0, g1 = free_at[:-1][before], starts[before]
    matched = gpu["launch_row"].to_numpy()[before] >= 0
    inside_replay = (gpu["graph"].to_numpy() & ~gpu["first_of_launch"].to_numpy())[before]
    x_r = gpu["launch_end_ns"].to_numpy()[before]
    queued_whole = ~matched | inside_replay | (x_r <= g0)
    host_end = np.where(queued_whole, g0, np.minimum(x_r, g1))
    streams = gpu["stream"].to_numpy()
    running = _stream_running_at(gpu, before)
    # Nothing ran before a leading gap: the op waited on launch latency alone.
    wait_api, wait_ns = _waits_before(gpu, before, stream_waits)
    other_stream = (streams[before] != running) & (running != -2)
    # A whole queued gap on another stream waited on it. After a late launch (split gap) the remainder
    # is a dependency when X's stream was made to wait on an event (a stream-wait call issued after the
    # stream's previous launch and before X's): the event may depend on work not in the trace (another
    # device, another process), so the trace cannot show it complete. Otherwise it is launch latency.
    # A whole queued gap is also a dependency when X's stream was made to wait on an event, and any
    # queued piece longer than QUEUED_LAUNCH_MAX_NS is: no launch takes a millisecond, the op waited
    # on something the trace does not show (a cross-stream edge inside a graph, another device).
    queued_from = np.where(queued_whole, g0, np.minimum(np.maximum(x_r, g0), g1))
    too_long = g1 - queued_from > QUEUED_LAUNCH_MAX_NS
    waited = np.where(queued_whole, other_stream, False) | (wait_api != "") | too_long
    queued_class = np.where(waited, "dependency", "launch")
    n = len(before)
    rows = {
        "start_ns": np.concatenate((g0, host_end)),
        "end_ns": np.concatenate((host_end, g1)),
        "class": np.concatenate((np.full(n, _HOST_BOUND, dtype=object), queued_class.astype(object))),
        "next_row": np.concatenate((before, before)),
        "wait_api": np.concatenate((np.full(n, "", dtype=object), wait_api)),
        "wait_call_ns": np.concatenate((np.full(n, -1, dtype=np.int64), wait_ns)),
    }
    # Piece 0 of gap i (host-bound) sorts before piece 1 (queued): key 2 i + piece.
    order_key = np.concatenate((2 * np.arange(n), 2 * np.arange(n) + 1))
    tail_start = free_at[-1] if len(starts) else span_ns[0]
    if tail_start < span_ns[1]:
        # Nothing ends a trailing gap: the host still had work in the step and queued nothing.
        for key, value in (
            ("start_ns", tail_start),
            ("end_ns", span_ns[1]),
            ("class", _HOST_BOUND),
            ("next_row", -1),
            ("wait_api", ""),
            ("wait_call_ns", -1),
        ):
            rows[key] = np.append(rows[key], value)
        order_key = np.append(order_key, 2 * n)
    order = np.argsort(order_key, kind="stable")
    pieces = pd.DataFrame({k: np.asarray(v)[order] for k, v in rows.items()})
    pieces = pieces[(pieces["end_ns"] > pieces["start_ns"]).to_numpy()].reset_index(drop=True)
    next_row = pieces["next_row"].to_numpy()
    has_next = next_row >= 0
    safe = np.maximum(next_row, 0)
    pieces["next_op"] = np.where(has_next, gpu["name"].to_numpy()[safe] if len(gpu) else "", "").astype(
        object
    )
    pieces["next_stream"] = np.where(has_next, streams[safe] if len(gpu) else -1, -1).astype(np.int64)
    pieces["read_id"] = np.full(len(pieces), -1, dtype=np.int64)
    pieces["start_ns"] = pieces["start_ns"].astype(np.int64)
    pieces["end_ns"] = pieces["end_ns"].astype(np.int64)
    return pieces, (pieces["class"] == _HOST_BOUND).to_numpy()


def _waits_before(
    gpu: pd.DataFrame, ending: np.ndarray, stream_waits: pd.DataFrame | None
) -> tuple[np.ndarray, np.ndarray]:
    """For each gap's closing op X: the last stream-wait call on X's launching thread issued after the
    previous launch on X's stream and before X's launch, for X's stream (or for an unknown stream when
    the trace does not say which stream waited, as on ROCm). ('' and -1 when none.)"""
    names = np.full(len(ending), "", dtype=object)
    times = np.full(len(ending), -1, dtype=np.int64)
    if stream_waits is None or not len(stream_waits) or not len(ending):
        return names, times
    launch_start = gpu["launch_start_ns"].to_numpy()
    op_stream = gpu["stream"].to_numpy()
    # Previous launch on the same stream, by launch time.
    order = np.lexsort((launch_start, op_stream))
    prev = np.full(len(gpu), np.iinfo(np.int64).min, dtype=np.int64)
    same = np.concatenate(([False], op_stream[order][1:] == op_stream[order][:-1]))
    prev_sorted = np.concatenate(([0], launch_start[order][:-1]))
    prev[order[same]] = prev_sorted[same]
    x_launch, x_stream, x_prev = launch_start[ending], op_stream[ending], prev[ending]
    x_tid = gpu["launch_tid"].astype(str).to_numpy()[ending]
    for (stream, tid), calls in stream_waits.groupby(["stream", "tid"], sort=False):
        order_calls = np.argsort(calls["start_ns"].to_numpy(), kind="stable")
        call_starts = calls["start_ns"].to_numpy()[order_calls]
        call_names = calls["name"].astype(str).to_numpy()[order_calls]
        k = np.searchsorted(call_starts, x_launch, side="left") - 1
        safe = np.maximum(k, 0)
        found = (
            (x_tid == str(tid))
            & ((x_stream == stream) | (stream == -1))
            & (x_launch >= 0)
            & (k >= 0)
            & (call_starts[safe] > x_prev)
            & (call_starts[safe] > times)
        )
        times[found] = call_starts[safe][found]
        names[found] = call_names[safe][found]
    return names, times


def clock_skew_ns(gpu: pd.DataFrame, reads: pd.DataFrame) -> int:
    """How far the GPU clock runs behind the host clock, as the trace itself proves it: a device-wide
    synchronize returns only after every op launched before it ended, so an op that ends after such a
    read returned shows the skew. 0 when no read proves any (the usual case on CUDA)."""
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


def _lost_leads(reads: pd.DataFrame, host_bound: pd.DataFrame, skew_ns: int = 0) -> pd.DataFrame:
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


def _regain_times(gpu: pd.DataFrame) -> np.ndarray:
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


def _assign_sync(pieces: pd.DataFrame, leads: pd.DataFrame, regain_ns: np.ndarray) -> pd.DataFrame:
    """Turn host-bound pieces into `sync` (up to each draining read's lead, in time order) and `host`."""
    classes = pieces["class"].to_numpy()
    host_bound = classes == _HOST_BOUND
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


def stream_wait_calls(runtime: pd.DataFrame, waits: pd.DataFrame) -> pd.DataFrame:
    """Stream-wait calls (`cudaStreamWaitEvent`, `hipStreamWaitEvent`, ...) with the stream that waited
    (from the call's `Stream Wait Event` sync row; -1 when the trace has none, as on ROCm).

    Returns:
        DataFrame with stream, tid, start_ns, name.
    """
    calls = runtime[category_mask(runtime["name"], rt.is_stream_wait)]
    rows = waits[(waits["name"].astype(str) == "Stream Wait Event").to_numpy()]
    stream_of = dict(zip(rows["correlation"].tolist(), rows["stream"].tolist(), strict=True))
    corr = calls["correlation"].tolist()
    return pd.DataFrame(
        {
            "stream": np.asarray([stream_of.get(c, -1) for c in corr], dtype=np.int64),
            "tid": calls["tid"].astype(str).to_numpy(),
            "start_ns": calls["start_ns"].to_numpy().astype(np.int64),
            "name": calls["name"].astype(str).to_numpy(),
        }
    )
