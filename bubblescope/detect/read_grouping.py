"""Group one rank's blocking calls into reads, for all calls at once (used by `detect.host_syncs`).

For each call: the innermost Python frame around it, walked up through library and read-tap frames to
the user's frame (or to bubblescope's own capture code or torch.profiler's stop, `markers.is_own_sync_frame`:
the call is dropped); the innermost ATen op
around it, walked up to the op the read is tied to (`_reading_ops`); and the outermost op of that chain
whose name says what kind of read it is. Calls under one reading-op instance form one read; a call
inside a call of its read already counted (a driver call inside its runtime call) is not counted again.

Every walk is one vectorised step per nesting level over the calls still walking, and names are
tested once per distinct name (`pd.factorize`), so the work is O(calls x depth) in numpy, not a
Python loop per call: 10 000 reads in one step are grouped in milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np
import pandas as pd

from bubblescope.trace import runtime_names as rt
from bubblescope.trace.markers import is_own_sync_frame
from bubblescope.trace.nesting import NestingIndex, is_user_frame

# Walking up the frames: a frame to walk through, bubblescope's own capture code, the user's frame.
_THROUGH, _OWN, _USER = 0, 1, 2
_NO_INDEX = np.int64(-1)


def group_calls(
    calls: pd.DataFrame,
    op_index: dict[str, NestingIndex],
    frame_index: dict[str, NestingIndex],
    own_index: dict[str, NestingIndex],
    wait_by_corr: pd.Series,
    own_frame_part: str,
    tap_frame_part: str,
    kind_of_op: dict[str, str],
) -> pd.DataFrame:
    """One row per read, sorted by start.

    Args:
        calls: blocking runtime calls (`name`, `tid`, `start_ns`, `end_ns`, `correlation`).
        op_index / frame_index / own_index: per thread, the cpu ops (no step markers), the Python
            frames, bubblescope's own synchronize annotations.
        wait_by_corr: GPU-side sync wait ns per correlation id.
        own_frame_part / tap_frame_part: a frame path part of bubblescope's own capture code, and of
            the read tap inside it, which wraps the user's own reads (walked through).
        kind_of_op: op name -> read kind, for the kinded op of each read's chain.

    Returns:
        DataFrame: tid, start_ns, end_ns, hold_start_ns, blocked_ns, wait_ns, api (the longest
        counted call), op, inner_op, op_kind_name (outermost kinded op of the chain, "" if none),
        site_frame, site_open_at_start, calls.
    """
    order = np.lexsort((-calls["end_ns"].to_numpy(), calls["start_ns"].to_numpy()))
    calls = calls.iloc[order]
    names = calls["name"].astype(str).to_numpy(dtype=object)
    tids = calls["tid"].astype(str).to_numpy(dtype=object)
    starts = calls["start_ns"].to_numpy().astype(np.int64)
    ends = calls["end_ns"].to_numpy().astype(np.int64)
    corrs = calls["correlation"].to_numpy().astype(np.int64)
    n_calls = len(calls)
    keep = np.ones(n_calls, dtype=bool)
    op_name = np.full(n_calls, "", dtype=object)
    inner_name = np.full(n_calls, "", dtype=object)
    kinded_name = np.full(n_calls, "", dtype=object)
    op_start = np.full(n_calls, -1, dtype=np.int64)
    site_frame = np.full(n_calls, "", dtype=object)
    site_open = np.zeros(n_calls, dtype=bool)
    frame_class = _frame_classifier(own_frame_part, tap_frame_part)
    for tid in pd.unique(tids).tolist():
        rows = np.flatnonzero(tids == tid)
        s, e = starts[rows], ends[rows]
        own = own_index.get(tid)
        if own is not None:
            keep[rows[own.innermost_many(s, e) >= 0]] = False
        frames = frame_index.get(tid)
        frame_j = frames.innermost_many(s, e) if frames is not None else np.full(len(rows), -1)
        user_j, own_frame = _user_or_own_frames(frames, frame_j, frame_class)
        keep[rows[own_frame]] = False
        has_user = user_j >= 0
        if has_user.any():
            site_frame[rows[has_user]] = frames.names[user_j[has_user]]
            # Kineto writes a frame open when tracing began with the line it was on, others with their
            # function's def line (see `trace.nesting.site_text`).
            site_open[rows[has_user]] = frames.starts[user_j[has_user]] <= frames.starts[0]
        ops = op_index.get(tid)
        if ops is None:
            continue
        # The reading op is not looked for above the innermost frame around the call.
        since = np.full(len(rows), np.iinfo(np.int64).min, dtype=np.int64)
        if frames is not None:
            since[frame_j >= 0] = frames.starts[frame_j[frame_j >= 0]]
        inner = ops.innermost_many(s, e)
        outer = _reading_ops(ops, inner, since)
        kinded = _outermost_kinded(ops, inner, outer, kind_of_op)
        found = inner >= 0
        op_name[rows[found]] = ops.names[outer[found]]
        inner_name[rows[found]] = ops.names[inner[found]]
        op_start[rows[found]] = ops.starts[outer[found]]
        has_kind = kinded >= 0
        kinded_name[rows[has_kind]] = ops.names[kinded[has_kind]]
    per_call = pd.DataFrame(
        {
            "tid": tids,
            "start_ns": starts,
            "end_ns": ends,
            "api": names,
            "wait_ns": _waits(corrs, wait_by_corr),
            "op": op_name,
            "inner_op": inner_name,
            "op_kind_name": kinded_name,
            "op_start": op_start,
            "site_frame": site_frame,
            "site_open_at_start": site_open,
        }
    )[keep]
    return _merge(per_call)


def _merge(per_call: pd.DataFrame) -> pd.DataFrame:
    """Calls (sorted by start, longest first) -> reads: one per reading-op instance; a call with no op
    around it, or an implicit synchronizer (a hipHostMalloc inside aten::item is the allocator's
    read, not the item's), stands alone."""
    columns = [
        "tid",
        "start_ns",
        "end_ns",
        "hold_start_ns",
        "blocked_ns",
        "wait_ns",
        "api",
        "op",
        "inner_op",
        "op_kind_name",
        "site_frame",
        "site_open_at_start",
        "calls",
    ]
    if not len(per_call):
        return pd.DataFrame({c: [] for c in columns})
    implicit = _name_flags(per_call["api"].to_numpy(), lambda n: rt.implicit_sync_kind(n) is not None)
    by_op = (per_call["op"].to_numpy() != "") & ~implicit
    starts = per_call["start_ns"].to_numpy()
    ends = per_call["end_ns"].to_numpy()
    key = np.where(by_op, per_call["op_start"].to_numpy(), -starts - 1)
    group = (
        pd.DataFrame({"tid": per_call["tid"].to_numpy(), "key": key})
        .groupby(["tid", "key"], sort=False)
        .ngroup()
        .to_numpy()
    )
    # Sorted by start: a call ending by the latest end of its read's earlier calls lies inside one of
    # them (a driver call inside its runtime call): already counted. Integer ns all along (epoch ns
    # do not fit a float exactly).
    by_group = np.argsort(group, kind="stable")
    group_sorted, ends_sorted = group[by_group], ends[by_group]
    latest_end = pd.Series(ends_sorted).groupby(group_sorted).cummax().to_numpy()
    inside = np.zeros(len(ends), dtype=bool)
    inside[1:] = (group_sorted[1:] == group_sorted[:-1]) & (ends_sorted[1:] <= latest_end[:-1])
    counted = np.empty(len(ends), dtype=bool)
    counted[by_group] = ~inside
    dur = ends - starts
    first = np.unique(group, return_index=True)[1]
    out = per_call.iloc[first].reset_index(drop=True)
    out["hold_start_ns"] = np.where(by_op[first], out["op_start"].to_numpy(), out["start_ns"].to_numpy())
    sums = pd.DataFrame({"group": group, "dur": dur, "wait": per_call["wait_ns"].to_numpy(), "end": ends})[
        counted
    ].groupby("group", sort=True)
    out["blocked_ns"] = sums["dur"].sum().to_numpy()
    out["wait_ns"] = sums["wait"].sum().to_numpy()
    out["end_ns"] = sums["end"].max().to_numpy()
    out["calls"] = sums["dur"].count().to_numpy()
    # The read's API is its longest counted call, the earliest on a tie.
    rows = np.flatnonzero(counted)
    longest = rows[np.lexsort((rows, -dur[rows], group[rows]))]
    heads = np.ones(len(longest), dtype=bool)
    heads[1:] = group[longest][1:] != group[longest][:-1]
    out["api"] = per_call["api"].to_numpy()[longest[heads]]
    return out[columns].sort_values("start_ns", kind="stable", ignore_index=True)


def _waits(corrs: np.ndarray, wait_by_corr: pd.Series) -> np.ndarray:
    """GPU-side sync wait ns of each call's correlation (0 without one). [n] int64."""
    if not len(wait_by_corr):
        return np.zeros(len(corrs), dtype=np.int64)
    found = wait_by_corr.reindex(corrs).to_numpy()
    return np.where((corrs >= 0) & ~pd.isna(found), np.nan_to_num(found.astype(float)), 0).astype(np.int64)


def _frame_classifier(own_frame_part: str, tap_frame_part: str) -> Callable[[str], int]:
    @cache
    def classify(name: str) -> int:
        # The read tap sits inside the capture code: test it first.
        if tap_frame_part in name:
            return _THROUGH
        # bubblescope's capture code, its session's step close / stop, torch.profiler's stop.
        if own_frame_part in name or is_own_sync_frame(name):
            return _OWN
        return _USER if is_user_frame(name) else _THROUGH

    return classify


def _user_or_own_frames(
    frames: NestingIndex | None, frame_j: np.ndarray, frame_class: Callable[[str], int]
) -> tuple[np.ndarray, np.ndarray]:
    """Walk up from each frame to the first that is the user's code or bubblescope's capture code,
    through library frames and the profile tap's wrapper frames: (that user frame or -1 [n] int64,
    True where bubblescope's own code comes first [n] bool)."""
    user = np.full(len(frame_j), -1, dtype=np.int64)
    own = np.zeros(len(frame_j), dtype=bool)
    walking = np.flatnonzero(frame_j >= 0)
    current = frame_j[walking].astype(np.int64)
    while len(walking):
        kind = _name_flags(frames.names[current], frame_class, dtype=np.int8)
        own[walking[kind == _OWN]] = True
        user[walking[kind == _USER]] = current[kind == _USER]
        through = kind == _THROUGH
        walking, current = walking[through], frames.parent[current[through]]
        alive = current >= 0
        walking, current = walking[alive], current[alive]
    return user, own


def _reading_ops(ops: NestingIndex, inner: np.ndarray, since_ns: np.ndarray) -> np.ndarray:
    """The op each read is tied to, from the innermost op around the call (-1: none): up through ATen
    ops (`aten::item` above `aten::_local_scalar_dense`) but not into a non-ATen op that holds them (a
    TorchScript `forward`, an `nn.Module` range), nor above the innermost Python frame's start; when
    the innermost op is not ATen, its outermost ancestor under that frame. [n] int64."""
    outer = inner.astype(np.int64).copy()
    walking = np.flatnonzero(inner >= 0)
    aten_only = _name_flags(ops.names[inner[walking]], _is_aten)
    while len(walking):
        parent = ops.parent[outer[walking]]
        up = parent >= 0
        safe = np.maximum(parent, 0)
        up &= ops.starts[safe] >= since_ns[walking]
        up &= ~aten_only | _name_flags(ops.names[safe], _is_aten)
        walking, aten_only = walking[up], aten_only[up]
        outer[walking] = parent[up]
    return outer


def _outermost_kinded(
    ops: NestingIndex, inner: np.ndarray, outer: np.ndarray, kind_of_op: dict[str, str]
) -> np.ndarray:
    """Per read, the outermost op from `inner` up to `outer` whose name has a read kind, or -1. [n]"""
    kinded = np.full(len(inner), -1, dtype=np.int64)
    walking = np.flatnonzero(inner >= 0)
    current = inner[walking].astype(np.int64)
    while len(walking):
        has_kind = _name_flags(ops.names[current], kind_of_op.__contains__)
        kinded[walking[has_kind]] = current[has_kind]
        going = current != outer[walking]
        walking, current = walking[going], ops.parent[current[going]]
        walking, current = walking[current >= 0], current[current >= 0]
    return kinded


def _is_aten(name: str) -> bool:
    return name.startswith("aten::")


def _name_flags(names: np.ndarray, predicate: Callable[[str], object], dtype: type = bool) -> np.ndarray:
    """`predicate` of each name, evaluated once per distinct name. [n] dtype."""
    if not len(names):
        return np.zeros(0, dtype=dtype)
    codes, distinct = pd.factorize(names)
    return np.asarray([predicate(str(name)) for name in distinct], dtype=dtype)[codes]
