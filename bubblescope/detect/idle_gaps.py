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
                  dependency  only with evidence in the trace (`evidence`): X's stream had been made
                              to wait on an event (`cudaStreamWaitEvent` / `hipStreamWaitEvent` seen
                              between the stream's previous launch and X's; the call is named:
                              "wait"), or the whole gap was queued and the op whose end opened it ran
                              on another stream than X ("stream": X waited on that stream's work)
                  a queued piece without that evidence stays `launch`, however long; when a kernel
                  launch call of over 1 ms (the driver loading a module, MODULE_LOAD_LAUNCH_NS)
                  ended inside the gap or was X's own, its evidence is "module load" (the tail of
                  first-call module loading, named in blame), and a piece queued longer than
                  QUEUED_LAUNCH_MAX_NS without either is named as such ("long queue")
    outside     the part of any gap outside every step's GPU interval; also the leading gap before
                a first op whose launch is not in the trace (it was queued before tracing began)

What a read costs is in `detect.read_blame`: host-bound pieces become `sync` (blamed on the read that
drained the device, at most its lost lead) or `host`.

Gaps are cut at the steps' GPU intervals (`trace.steps.gpu_step_bounds`), not at their host windows:
a step owns the GPU ops launched in its host window, and its GPU interval runs from the end of the
previous step's work to the end of its own.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bubblescope.detect.read_blame import HOST_BOUND, assign_sync, clock_skew_ns, lost_leads, regain_times
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
    "evidence",
    "prev_stream",
]
# Kernel-to-kernel and graph launch latency is µs (tens of µs for a graph's first node); a queued piece
# longer than this with no evidence of a wait is named "long queue" in blame (still `launch`: the trace
# shows no dependency, so none is claimed).
QUEUED_LAUNCH_MAX_NS = 1_000_000
# A kernel launch call this long is the driver loading the kernel's module (lazy loading); the same
# threshold as `host_blame.MODULE_LOAD_LAUNCH_NS`.
MODULE_LOAD_LAUNCH_NS = 1_000_000


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
    device_syncs: pd.DataFrame | None = None,
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
        device_syncs: every device-wide synchronize call of the rank (api, start_ns, end_ns), the
            profiler's and bubblescope's own included: they prove the GPU clock's lag as well as the
            user's (`read_blame.clock_skew_ns`). Default None: the reads only.

    Returns:
        (gaps with GAP_COLUMNS, the `dur_ns` sum equal to span minus busy time;
         lost lead L in ns per read_id on this device, 0 for a read that did not drain it).
    """
    pieces, host_bound = _raw_pieces(gpu, span_ns, stream_waits)
    probes = reads if device_syncs is None else device_syncs
    leads = lost_leads(reads, pieces[host_bound], clock_skew_ns(gpu, probes))
    if bounds_ns is None:
        lead_ns = unlaunched_lead_ns(gpu)
        bounds_ns = gpu_step_bounds(launch_times_ns(gpu), gpu["end_ns"].to_numpy(), steps, lead_ns)
    pieces = split_at_steps(pieces, bounds_ns)
    budget = leads
    if spent_ns is not None and len(leads):
        spent = leads["read_id"].map(spent_ns).fillna(0).to_numpy().astype(np.int64)
        budget = leads.assign(lead_ns=np.maximum(leads["lead_ns"].to_numpy() - spent, 0))
    pieces = assign_sync(pieces, budget, regain_times(gpu))
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
    # A whole queued gap is also a dependency when X's stream was made to wait on an event. A queued
    # piece longer than QUEUED_LAUNCH_MAX_NS with neither stays `launch` (issue 23 §4: no dependency is
    # claimed without evidence) and its blame names it a long queue.
    queued_from = np.where(queued_whole, g0, np.minimum(np.maximum(x_r, g0), g1))
    after_other_stream = np.where(queued_whole, other_stream, False)
    evidence = np.where(wait_api != "", "wait", np.where(after_other_stream, "stream", "")).astype(object)
    loaded = _module_load_during(gpu, before, g0, g1)
    evidence[(evidence == "") & loaded] = "module load"
    evidence[(evidence == "") & (g1 - queued_from > QUEUED_LAUNCH_MAX_NS)] = "long queue"
    waited = (evidence == "wait") | (evidence == "stream")
    queued_class = np.where(waited, "dependency", "launch")
    n = len(before)
    rows = {
        "start_ns": np.concatenate((g0, host_end)),
        "end_ns": np.concatenate((host_end, g1)),
        "class": np.concatenate((np.full(n, HOST_BOUND, dtype=object), queued_class.astype(object))),
        "next_row": np.concatenate((before, before)),
        "wait_api": np.concatenate((np.full(n, "", dtype=object), wait_api)),
        "wait_call_ns": np.concatenate((np.full(n, -1, dtype=np.int64), wait_ns)),
        "evidence": np.concatenate((np.full(n, "", dtype=object), evidence)),
        "prev_stream": np.concatenate((running, running)).astype(np.int64),
    }
    # Piece 0 of gap i (host-bound) sorts before piece 1 (queued): key 2 i + piece.
    order_key = np.concatenate((2 * np.arange(n), 2 * np.arange(n) + 1))
    tail_start = free_at[-1] if len(starts) else span_ns[0]
    if tail_start < span_ns[1]:
        # Nothing ends a trailing gap: the host still had work in the step and queued nothing.
        for key, value in (
            ("start_ns", tail_start),
            ("end_ns", span_ns[1]),
            ("class", HOST_BOUND),
            ("next_row", -1),
            ("wait_api", ""),
            ("wait_call_ns", -1),
            ("evidence", ""),
            ("prev_stream", -2),
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
    return pieces, (pieces["class"] == HOST_BOUND).to_numpy()


def _module_load_during(gpu: pd.DataFrame, ending: np.ndarray, g0: np.ndarray, g1: np.ndarray) -> np.ndarray:
    """[n] bool per gap: X's own launch call, or another kernel launch call ending inside [g0, g1], took
    over MODULE_LOAD_LAUNCH_NS (the driver loading a module on first call)."""
    if not len(ending):
        return np.zeros(0, dtype=bool)
    launch_dur = gpu["launch_end_ns"].to_numpy() - gpu["launch_start_ns"].to_numpy()
    long_launch = (gpu["launch_row"].to_numpy() >= 0) & (launch_dur >= MODULE_LOAD_LAUNCH_NS)
    own = long_launch[ending]
    ends = np.sort(gpu["launch_end_ns"].to_numpy()[long_launch])
    if not len(ends):
        return own
    inside = np.searchsorted(ends, g1, side="right") - np.searchsorted(ends, g0, side="left")
    return own | (inside > 0)


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


def device_sync_calls(runtime: pd.DataFrame) -> pd.DataFrame:
    """Device-wide synchronize calls (api, start_ns, end_ns), whoever made them."""
    calls = runtime[category_mask(runtime["name"], rt.DEVICE_SYNCHRONIZE.__contains__)]
    return pd.DataFrame(
        {
            "api": calls["name"].astype(str).to_numpy(),
            "start_ns": calls["start_ns"].to_numpy().astype(np.int64),
            "end_ns": calls["end_ns"].to_numpy().astype(np.int64),
        }
    )


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
