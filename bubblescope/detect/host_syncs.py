"""Detector: host-blocking device reads.

Heuristic. A runtime/driver call (CUDA or HIP: names from `trace.runtime_names`) blocks the host on
the device when it is
  - an explicit synchronize (`cudaStreamSynchronize`, `hipDeviceSynchronize`, `cudaEventSynchronize`,
    the driver `cu*Synchronize` forms, ...),
  - a synchronous copy (`cudaMemcpy`, `cuMemcpyDtoH`, `hipMemcpyWithStream`, ...: no `Async` in the
    name),
  - a device-to-host async copy into pageable memory (the driver stages it and waits for the data;
    a host-to-device one from pageable memory returns once the source is staged: not a read), or a
    synchronous memset on pageable or pinned host memory (pinned: measured on the H200),
  - an implicit synchronizer: `cudaFree`/`hipFree` (the caching allocator releasing memory),
    pinned host allocation and unregistration (`cudaHostAlloc`, `cudaHostUnregister`, `hipHostMalloc`,
    ...; not `cudaHostRegister`, measured on the H200 to return with a kernel still running), and
    `cudaMalloc`/`hipMalloc` when the trace shows it waited (a sync row), each its own read kind, or
  - any call the profiler paired with a `cuda_sync` wait row (except `Stream Wait Event`, which blocks
    a stream, not the host, and except polls: `cudaEventQuery` / `cudaStreamQuery` and their HIP and
    driver forms return at once whatever the device state, yet CUPTI pairs them with an "Event Sync"
    row; a spin loop of them is polling, a wait the host chose, not a read).
Calls under one outermost ATen op instance are one read (`.item()` is a `cudaMemcpyAsync` plus a
`cudaStreamSynchronize`); blocked time is the host time of those calls. Each read is tied to the
outermost ATen op of the chain around the call under the innermost Python frame (`aten::item` rather
than its `aten::_local_scalar_dense` child, but not a TorchScript `forward` holding it) and to the
innermost Python frame outside torch and site-packages.

A read holds the host over [hold_start_ns, end_ns]: from the start of the outermost user-visible call
that blocks (the enclosing ATen op, such as `aten::item` / `aten::to`, or the runtime call when there is
none: a pageable `.cpu()` already blocks inside its `cudaMemcpyAsync`) to the end of its last
blocking call. `detect.idle_gaps` bounds what a read can be blamed for with that interval.

bubblescope's own synchronize (under a `bubblescope.own_sync` / `bubblescope.window_drain` annotation,
or called from `bubblescope/capture/` code) is not the user's read: dropped.

    host   |--launch--launch--[aten::item: memcpy | streamSync ........]--python--launch--
    GPU    |==k1==k2==k3==================memcpy|            idle            |==k4==
                                                ^ read returns  gap blamed on the read's site
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bubblescope.trace import runtime_names as rt
from bubblescope.trace.nesting import indexes_by_thread, is_user_frame, site_text
from bubblescope.trace.tables import TraceTables, category_mask

_NOT_HOST_BLOCKING_WAITS = frozenset({"Stream Wait Event", "Wait Event"})
_MARKER_PREFIXES = ("ProfilerStep#", "bubblescope.", "## ")
# Code of bubblescope's own profiled window; a read called from it is the tool's, not the user's.
_OWN_FRAME_PART = "bubblescope/capture/"
# Except the read tap and step hooks of `bubblescope profile` (capture/user_reads.py `tapped`, ...):
# they wrap the user's own `.item()` / `synchronize()` calls, so their frame sits between the user's
# line and the read. It is neither the user's site nor the tool's synchronize: walked through. (Taking it
# for the tool's dropped every tapped read: 0 of the 8 aten::item reads of the gpt-fast profile sample.)
_TAP_FRAME_PART = "bubblescope/capture/user_"
# Annotations bubblescope puts around its own synchronizes (profiled window drain, `bubblescope.profile`
# session). Only these: other `bubblescope.*` ranges (`bubblescope.step`, `bubblescope.read#N`) hold the
# user's own reads.
OWN_SYNC_ANNOTATIONS = frozenset({"bubblescope.own_sync", "bubblescope.window_drain"})
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
    "free": "cudaFree/hipFree waits for the whole device: the caching allocator is releasing memory "
    "(torch.cuda.empty_cache() in the loop, or fragmentation forcing frees); drop empty_cache, keep "
    "shapes stable, or try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
    "host_alloc": "pinned host allocation (cudaHostAlloc, pin_memory=True) takes milliseconds and "
    "unregistration (cudaHostUnregister) waits for the device (measured on the H200; whether "
    "cudaHostAlloc itself waits is not determined: it outlasts a 20 ms kernel): allocate pinned "
    "buffers once before the loop and reuse them",
    "malloc": "a device allocation waited: the caching allocator found no cached block; warm it up "
    "(run one step first) or keep tensor shapes stable",
    "memset": "a synchronous memset on pageable memory blocks the host: use an async memset on device memory",
    "other": "a synchronous runtime call blocks the host: use the asynchronous variant on a stream",
}

READ_COLUMNS = [
    "read_id",
    "tid",
    "start_ns",
    "end_ns",
    "hold_start_ns",
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
    is_named_blocking = category_mask(
        names,
        lambda n: (
            rt.is_synchronize(n) or rt.is_sync_copy(n) or rt.implicit_sync_kind(n) in ("free", "host_alloc")
        ),
    )
    # Pageable memory: a device-to-host async copy into pageable memory waits for the data (a
    # host-to-device one only stages the source and returns), and a memset cannot be queued.
    # Pinned memory: a synchronous cudaMemset on pinned host memory waits for the device (measured on
    # the H200: 1.3 ms on an idle GPU, 21.2 ms behind a queued 20 ms kernel, which had ended at return
    # 3/3; benchmarks/RESULTS.md, implicit synchronizers). Only the synchronous call: the launcher
    # check below keeps cudaMemsetAsync and copies into pinned memory out.
    staged = gpu[(gpu["kind"] != "kernel").to_numpy()]
    names_of = staged["name"].astype(str)
    to_pageable = names_of.str.contains("-> Pageable", regex=False) | (
        names_of.str.contains("DtoH", regex=False) & names_of.str.contains("Pageable", regex=False)
    )
    memset_host = (staged["kind"] == "memset") & names_of.str.contains("Pageable|Pinned", regex=True)
    pageable = to_pageable.to_numpy()
    on_host = (to_pageable | memset_host).to_numpy()
    host_rows = staged.loc[on_host & (staged["launch_row"] >= 0).to_numpy(), "launch_row"].to_numpy()
    copies_to_pageable = pageable[on_host & (staged["launch_row"] >= 0).to_numpy()]
    blocks_on_host_memory = np.zeros(len(runtime), dtype=bool)
    launcher = names.to_numpy()[host_rows] if len(host_rows) else np.zeros(0, dtype=object)
    staging_call = np.asarray(
        [
            (to_pg and rt.is_copy(str(n))) or rt.is_sync_memset(str(n))
            for n, to_pg in zip(launcher, copies_to_pageable, strict=True)
        ],
        dtype=bool,
    )
    blocks_on_host_memory[host_rows[staging_call]] = True
    waits = tables.waits
    blocking_waits = waits[~category_mask(waits["name"], _NOT_HOST_BLOCKING_WAITS.__contains__)]
    has_wait = runtime["correlation"].isin(blocking_waits["correlation"]).to_numpy() & (
        runtime["correlation"].to_numpy() >= 0
    )
    never = category_mask(names, lambda n: rt.is_poll(n) or rt.is_stream_wait(n))
    return np.flatnonzero((is_named_blocking | blocks_on_host_memory | has_wait) & ~never)


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
    own_marks = category_mask(tables.ops["name"], OWN_SYNC_ANNOTATIONS.__contains__)
    own_index = indexes_by_thread(tables.ops[own_marks], tids)
    wait_by_corr = (
        tables.waits.groupby("correlation")["end_ns"].sum()
        - tables.waits.groupby("correlation")["start_ns"].sum()
    )
    return _reads_frame(_group_calls(calls, op_index, frame_index, own_index, wait_by_corr))


def _group_calls(
    calls: pd.DataFrame, op_index: dict, frame_index: dict, own_index: dict, wait_by_corr: pd.Series
) -> list[dict]:
    """Merge blocking calls under one outer ATen op instance into one read (dicts, unsorted); calls
    of bubblescope's own window (see the module docstring) are dropped."""
    groups: dict[tuple[str, int], dict] = {}
    for name, tid, start, end, corr in zip(
        calls["name"].astype(str),
        calls["tid"].astype(str),
        calls["start_ns"].tolist(),
        calls["end_ns"].tolist(),
        calls["correlation"].tolist(),
        strict=True,
    ):
        own = own_index.get(tid)
        if own is not None and own.innermost(start, end) >= 0:
            continue
        found = _enclosing(op_index.get(tid), frame_index.get(tid), start, end)
        if found["own"]:
            continue
        # No enclosing op: each call stands alone (key by its own start). So does an implicit
        # synchronizer (a hipHostMalloc inside aten::item is the allocator's read, not the item's).
        implicit = rt.implicit_sync_kind(name) is not None
        key = (tid, found["op_start"] if found["op"] and not implicit else -start - 1)
        group = groups.get(key)
        wait_ns = int(wait_by_corr.get(corr, 0)) if corr >= 0 else 0
        if group is None:
            groups[key] = {
                **found,
                "tid": tid,
                "start_ns": start,
                "end_ns": end,
                "hold_start_ns": found["op_start"] if found["op"] and not implicit else start,
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
        group["hold_start_ns"] = min(group["hold_start_ns"], start)
        if end - start > group["api_dur"]:
            group["api"], group["api_dur"] = name, end - start
    return list(groups.values())


def _enclosing(ops, frames, start: int, end: int) -> dict:
    frame_j = frames.innermost(start, end) if frames is not None else -1
    user_j, own = _user_or_own_frame(frames, frame_j)
    since = int(frames.starts[frame_j]) if frame_j >= 0 else np.iinfo(np.int64).min
    inner = ops.innermost(start, end) if ops is not None else -1
    outer = _reading_op(ops, inner, since) if inner >= 0 else -1
    return {
        "op": str(ops.names[outer]) if outer >= 0 else "",
        "inner_op": str(ops.names[inner]) if inner >= 0 else "",
        "op_start": int(ops.starts[outer]) if outer >= 0 else -1,
        "op_chain": _chain(ops, inner, outer),
        "site_frame": str(frames.names[user_j]) if user_j >= 0 else "",
        # Kineto writes a frame open when tracing began with the line it was on, others with their
        # function's def line (see `trace.nesting.site_text`).
        "site_open_at_start": bool(user_j >= 0 and frames.starts[user_j] <= frames.starts[0]),
        "own": own,
    }


def _reading_op(ops, inner: int, since_ns: int) -> int:
    """The op a read is tied to: from the innermost op around the call, up through ATen ops
    (`aten::item` above `aten::_local_scalar_dense`, `aten::is_nonzero` above `aten::item`) but not
    into a non-ATen op that holds them (a TorchScript `forward`, an `nn.Module` range); when the
    innermost op is not ATen, its outermost ancestor under the innermost Python frame."""
    if not str(ops.names[inner]).startswith("aten::"):
        return ops.outermost_since(inner, since_ns)
    j = inner
    while True:
        parent = int(ops.parent[j])
        if parent < 0 or ops.starts[parent] < since_ns or not str(ops.names[parent]).startswith("aten::"):
            return j
        j = parent


def _user_or_own_frame(frames, j: int) -> tuple[int, bool]:
    """Walk up from frame `j` to the first frame that is the user's code or bubblescope's capture
    code, through the profile tap's wrapper frames: (that user frame or -1, True when bubblescope's own
    code comes first)."""
    while j >= 0:
        name = str(frames.names[j])
        if _TAP_FRAME_PART in name:
            j = int(frames.parent[j])
            continue
        if _OWN_FRAME_PART in name:
            return -1, True
        if is_user_frame(name):
            return j, False
        j = int(frames.parent[j])
    return -1, False


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
    """Kind of a read from its ATen op chain (outer first) and blocking API name (CUDA or HIP).

    An implicit synchronizer (`cudaFree`, `hipHostMalloc`, ...) or a synchronous memset names its own
    kind whatever op called it: the allocator, not the op, is what the user can change.
    """
    implicit = rt.implicit_sync_kind(api)
    if implicit:
        return implicit
    if rt.is_sync_memset(api):
        return "memset"
    for op in op_chain:
        kind = _KIND_OF_OP.get(op)
        if kind:
            return kind
    if "Event" in api:
        return "event"
    if "Synchronize" in api:
        return "synchronize"
    return "copy" if rt.is_copy(api) or "Memcpy" in api else "other"


def _reads_frame(groups: list[dict]) -> pd.DataFrame:
    groups.sort(key=lambda g: g["start_ns"])
    records = []
    for read_id, g in enumerate(groups):
        kind = classify_read(g["op_chain"], g["api"])
        site = (
            site_text(g["site_frame"], g["site_open_at_start"])
            if g["site_frame"]
            else (f"{NO_STACK_SITE} {g['op']}".strip() if g["op"] else NO_STACK_SITE)
        )
        records.append(
            {
                "read_id": read_id,
                "tid": g["tid"],
                "start_ns": g["start_ns"],
                "end_ns": g["end_ns"],
                "hold_start_ns": g["hold_start_ns"],
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
        {
            "start_ns": np.int64,
            "end_ns": np.int64,
            "hold_start_ns": np.int64,
            "blocked_ns": np.int64,
            "wait_ns": np.int64,
        }
    )
