"""Detector: host-blocking device reads.

Heuristic. A runtime/driver call blocks the host on the device when it is
  - an explicit synchronize (`cudaStreamSynchronize`, `cudaDeviceSynchronize`, `cudaEventSynchronize`
    and the driver `cu*Synchronize` forms),
  - a synchronous copy (`cudaMemcpy`, `cudaMemcpy2D`, `cuMemcpyDtoH`, ... : no `Async` in the name),
  - an async copy whose GPU side is device-to-pageable (the driver stages it and waits), or
  - any call the profiler paired with a `cuda_sync` wait row (except `Stream Wait Event`, which blocks
    a stream, not the host, and except polls: `cudaEventQuery` / `cudaStreamQuery` and their driver
    forms return at once whatever the device state, yet CUPTI pairs them with an "Event Sync" row).
Calls under one outermost ATen op instance are one read (`.item()` is a `cudaMemcpyAsync` plus a
`cudaStreamSynchronize`); blocked time is the host time of those calls. Each read is tied to the
outermost ATen op under the innermost Python frame (`aten::item` rather than its
`aten::_local_scalar_dense` child) and to the innermost Python frame outside torch and site-packages.

    host   |--launch--launch--[aten::item: memcpy | streamSync ........]--python--launch--
    GPU    |==k1==k2==k3==================memcpy|            idle            |==k4==
                                                ^ read returns  gap blamed on the read's site
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bubblescope.trace.nesting import indexes_by_thread, short_site
from bubblescope.trace.tables import TraceTables, category_mask

SYNC_APIS = frozenset(
    {
        "cudaStreamSynchronize",
        "cudaDeviceSynchronize",
        "cudaEventSynchronize",
        "cudaThreadSynchronize",
        "cuStreamSynchronize",
        "cuCtxSynchronize",
        "cuEventSynchronize",
        "cudaStreamSynchronize_ptsz",
        "cuStreamSynchronize_ptsz",
    }
)
_NOT_HOST_BLOCKING_WAITS = frozenset({"Stream Wait Event", "Wait Event"})
# Polls return at once (cudaSuccess or cudaErrorNotReady) and never block the host, but CUPTI with
# sync events on pairs each one with a `cuda_sync` "Event Sync" row; the caching allocator polls
# events on every cross-stream free and a run-ahead loop polls its pinned readback, so counting them
# would report reads where the host never waited.
POLL_APIS = frozenset(
    {
        "cudaEventQuery",
        "cuEventQuery",
        "cudaStreamQuery",
        "cuStreamQuery",
        "cudaStreamQuery_ptsz",
        "cuStreamQuery_ptsz",
        "cudaStreamGetCaptureInfo",
        "cudaStreamIsCapturing",
    }
)
_MARKER_PREFIXES = ("ProfilerStep#", "bubblescope.", "## ")
NO_STACK_SITE = "(no Python stack in trace)"

# op name -> kind; the first kind found walking from the outer op inwards wins.
_KIND_OF_OP = {
    "aten::item": "item",
    "aten::_local_scalar_dense": "item",
    "aten::nonzero": "nonzero",
    "aten::masked_select": "nonzero",
    "aten::unique": "nonzero",
    "aten::_unique": "nonzero",
    "aten::_unique2": "nonzero",
    "aten::unique_consecutive": "nonzero",
    "aten::unique_dim": "nonzero",
    "aten::repeat_interleave": "nonzero",
    "aten::nonzero_numpy": "nonzero",
    "aten::argwhere": "nonzero",
    "aten::masked_scatter": "nonzero",
    "aten::bincount": "nonzero",
    "aten::tolist": "copy",
    "aten::to": "copy",
    "aten::_to_copy": "copy",
    "aten::copy_": "copy",
    "aten::cpu": "copy",
    "aten::numpy": "copy",
}
HINTS = {
    "item": "keep the value on device (torch.where, masks, device-side metadata), or copy it into a "
    "pinned buffer with non_blocking=True and read it one step later",
    "nonzero": "data-dependent output size forces a read of the size: use a fixed-size form (mask "
    "arithmetic, topk, nonzero_static / unique with a size bound) so the host never waits",
    "copy": "device-to-host copy waits for the GPU: copy into pinned memory with non_blocking=True and "
    "consume it a step later; a copy to pageable memory always blocks",
    "synchronize": "explicit synchronize in the loop: drop it, or record a CUDA event and wait on it "
    "from a stream (stream.wait_event) instead of the host",
    "event": "host waits on an event: make the consumer stream wait (stream.wait_event) or poll "
    "event.query() instead",
    "other": "a synchronous CUDA call blocks the host: use the asynchronous variant on a stream",
}

READ_COLUMNS = [
    "read_id",
    "tid",
    "start_ns",
    "end_ns",
    "blocked_ns",
    "wait_ns",
    "api",
    "op",
    "inner_op",
    "kind",
    "site",
    "site_frame",
    "hint",
    "calls",
]


def blocking_calls(tables: TraceTables, gpu: pd.DataFrame) -> np.ndarray:
    """Row numbers in `tables.runtime` of calls that block the host on the device. [n] int64."""
    runtime = tables.runtime
    names = runtime["name"]
    is_sync = category_mask(names, SYNC_APIS.__contains__)
    is_sync_copy = category_mask(
        names, lambda n: n.startswith(("cudaMemcpy", "cuMemcpy")) and "Async" not in n
    )
    memcpys = gpu[(gpu["kind"] == "memcpy").to_numpy()]
    pageable = memcpys["name"].astype(str).str.contains("Pageable", regex=False).to_numpy()
    pageable_rows = memcpys.loc[pageable & (memcpys["launch_row"] >= 0).to_numpy(), "launch_row"]
    is_pageable = np.zeros(len(runtime), dtype=bool)
    is_pageable[pageable_rows.to_numpy()] = True
    waits = tables.waits
    blocking_waits = waits[~category_mask(waits["name"], _NOT_HOST_BLOCKING_WAITS.__contains__)]
    has_wait = runtime["correlation"].isin(blocking_waits["correlation"]).to_numpy() & (
        runtime["correlation"].to_numpy() >= 0
    )
    is_poll = category_mask(names, POLL_APIS.__contains__)
    return np.flatnonzero((is_sync | is_sync_copy | is_pageable | has_wait) & ~is_poll)


def find_host_syncs(tables: TraceTables, gpu: pd.DataFrame) -> pd.DataFrame:
    """One row per host-blocking read (see the module docstring).

    Args:
        tables: one rank's tables.
        gpu: `tables.gpu` after `correlate_launches` (needs `launch_row`, `kind`).

    Returns:
        DataFrame with READ_COLUMNS, sorted by start: `blocked_ns` host time in the blocking calls,
        `wait_ns` GPU-side sync wait rows, `op` outer ATen op ("" if none), `kind` one of HINTS' keys.
    """
    rows = blocking_calls(tables, gpu)
    if not len(rows):
        return pd.DataFrame({c: [] for c in READ_COLUMNS})
    calls = tables.runtime.iloc[rows]
    tids = set(calls["tid"].astype(str))
    cpu_ops = tables.ops[(tables.ops["cat"] == "cpu_op").to_numpy()]
    # Old traces write step markers (ProfilerStep#N, record_function) as ops; they are not the op
    # that read the device.
    markers = category_mask(cpu_ops["name"], lambda n: n.startswith(_MARKER_PREFIXES))
    cpu_ops = cpu_ops[~markers]
    op_index = indexes_by_thread(cpu_ops, tids)
    frame_index = indexes_by_thread(tables.frames, tids)
    wait_by_corr = (
        tables.waits.groupby("correlation")["end_ns"].sum()
        - tables.waits.groupby("correlation")["start_ns"].sum()
    )
    return _reads_frame(_group_calls(calls, op_index, frame_index, wait_by_corr))


def _group_calls(
    calls: pd.DataFrame, op_index: dict, frame_index: dict, wait_by_corr: pd.Series
) -> list[dict]:
    """Merge blocking calls under one outer ATen op instance into one read (dicts, unsorted)."""
    groups: dict[tuple[str, int], dict] = {}
    for name, tid, start, end, corr in zip(
        calls["name"].astype(str),
        calls["tid"].astype(str),
        calls["start_ns"].tolist(),
        calls["end_ns"].tolist(),
        calls["correlation"].tolist(),
        strict=True,
    ):
        found = _enclosing(op_index.get(tid), frame_index.get(tid), start, end)
        # No enclosing op: each call stands alone (key by its own start).
        key = (tid, found["op_start"] if found["op"] else -start - 1)
        group = groups.get(key)
        wait_ns = int(wait_by_corr.get(corr, 0)) if corr >= 0 else 0
        if group is None:
            groups[key] = {
                **found,
                "tid": tid,
                "start_ns": start,
                "end_ns": end,
                "blocked_ns": end - start,
                "wait_ns": wait_ns,
                "api": name,
                "api_dur": end - start,
                "calls": 1,
            }
            continue
        if start >= group["start_ns"] and end <= group["end_ns"]:
            continue  # a driver call inside a runtime call already counted
        group["blocked_ns"] += end - start
        group["wait_ns"] += wait_ns
        group["calls"] += 1
        group["end_ns"] = max(group["end_ns"], end)
        if end - start > group["api_dur"]:
            group["api"], group["api_dur"] = name, end - start
    return list(groups.values())


def _enclosing(ops, frames, start: int, end: int) -> dict:
    frame_j = frames.innermost(start, end) if frames is not None else -1
    user_j = frames.first_user_ancestor(frame_j) if frame_j >= 0 else -1
    since = int(frames.starts[frame_j]) if frame_j >= 0 else np.iinfo(np.int64).min
    inner = ops.innermost(start, end) if ops is not None else -1
    outer = ops.outermost_since(inner, since) if inner >= 0 else -1
    return {
        "op": str(ops.names[outer]) if outer >= 0 else "",
        "inner_op": str(ops.names[inner]) if inner >= 0 else "",
        "op_start": int(ops.starts[outer]) if outer >= 0 else -1,
        "op_chain": _chain(ops, inner, outer),
        "site_frame": str(frames.names[user_j]) if user_j >= 0 else "",
    }


def _chain(ops, inner: int, outer: int) -> list[str]:
    names: list[str] = []
    j = inner
    while j >= 0:
        names.append(str(ops.names[j]))
        if j == outer:
            break
        j = int(ops.parent[j])
    return names[::-1]


def classify_read(op_chain: list[str], api: str) -> str:
    """Kind of a read from its ATen op chain (outer first) and blocking API name."""
    for op in op_chain:
        kind = _KIND_OF_OP.get(op)
        if kind:
            return kind
    if "Event" in api:
        return "event"
    if "Synchronize" in api:
        return "synchronize"
    return "copy" if "Memcpy" in api else "other"


def _reads_frame(groups: list[dict]) -> pd.DataFrame:
    groups.sort(key=lambda g: g["start_ns"])
    records = []
    for read_id, g in enumerate(groups):
        kind = classify_read(g["op_chain"], g["api"])
        site = (
            short_site(g["site_frame"])
            if g["site_frame"]
            else (f"{NO_STACK_SITE} {g['op']}".strip() if g["op"] else NO_STACK_SITE)
        )
        records.append(
            {
                "read_id": read_id,
                "tid": g["tid"],
                "start_ns": g["start_ns"],
                "end_ns": g["end_ns"],
                "blocked_ns": g["blocked_ns"],
                "wait_ns": g["wait_ns"],
                "api": g["api"],
                "op": g["op"],
                "inner_op": g["inner_op"],
                "kind": kind,
                "site": site,
                "site_frame": g["site_frame"],
                "hint": HINTS[kind],
                "calls": g["calls"],
            }
        )
    frame = pd.DataFrame.from_records(records, columns=READ_COLUMNS)
    return frame.astype(
        {"start_ns": np.int64, "end_ns": np.int64, "blocked_ns": np.int64, "wait_ns": np.int64}
    )
