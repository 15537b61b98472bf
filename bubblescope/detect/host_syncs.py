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

Only the user's reads are the user's; dropped, in any trace:
  - bubblescope's own synchronize: under a `bubblescope.own_sync` / `bubblescope.window_drain`
    annotation, called from `bubblescope/capture/` code, or from a bubblescope function named in
    `markers.OWN_SYNC_FUNCTIONS` (profile window, session step close / stop, timed repeats);
  - torch.profiler's synchronize when a profile stops: with Python stacks, any call under
    `torch/profiler/profiler.py` or `torch/autograd/profiler.py` (`stop` / `stop_trace` / `__exit__`);
    without stacks (`_profiler_stop`), the trace's last device-wide synchronize when it has no Python
    frame and no op or annotation around it, starts after every step ended and nothing is launched
    after it: the profiler stopping is the last thing a trace records.

    host   |--launch--launch--[aten::item: memcpy | streamSync ........]--python--launch--
    GPU    |==k1==k2==k3==================memcpy|            idle            |==k4==
                                                ^ read returns  gap blamed on the read's site
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bubblescope.detect.read_grouping import group_calls
from bubblescope.trace import runtime_names as rt
from bubblescope.trace.markers import OWN_SYNC_ANNOTATIONS
from bubblescope.trace.nesting import indexes_by_thread, site_text
from bubblescope.trace.steps import StepWindows
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
    "memset": "a synchronous memset of host memory waits for the device (measured on the H200 with pinned "
    "memory): use cudaMemsetAsync / tensor.zero_() on a stream",
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


def find_host_syncs(tables: TraceTables, gpu: pd.DataFrame, steps: StepWindows | None = None) -> pd.DataFrame:
    """One row per host-blocking read (see the module docstring).

    Args:
        tables: one rank's tables.
        gpu: `tables.gpu` after `correlate_launches` (needs `launch_row`, `kind`).
        steps: the rank's steps; with them, torch.profiler's stop synchronize is recognised in a trace
            without Python stacks too. Default None.

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
    reads = group_calls(
        calls, op_index, frame_index, own_index, wait_by_corr, _OWN_FRAME_PART, _TAP_FRAME_PART, _KIND_OF_OP
    )
    if steps is not None and len(reads):
        reads = reads.drop(index=_profiler_stop(reads, tables, gpu, steps)).reset_index(drop=True)
    return _reads_frame(reads)


def _profiler_stop(reads: pd.DataFrame, tables: TraceTables, gpu: pd.DataFrame, steps: StepWindows) -> list:
    """Index (in `reads`) of torch.profiler's stop synchronize in a trace without Python stacks, or [].

    The candidate is the last read, when it is one device-wide synchronize with no Python frame and no
    op or annotation around it (step markers aside), starting after every step ended (a synchronize
    inside a step is the user's) and with no GPU work launched after it. With stacks, the frame walk
    (`markers.is_own_sync_frame`) decides instead.
    """
    last = reads.index[-1]
    row = reads.loc[last]
    if row["api"] not in rt.DEVICE_SYNCHRONIZE or row["op"] or row["site_frame"] or row["calls"] != 1:
        return []
    start, end, tid = int(row["start_ns"]), int(row["end_ns"]), str(row["tid"])
    if steps.source != "whole-trace" and len(steps) and start < int(steps.end_ns.max()):
        return []
    launched = gpu["launch_start_ns"].to_numpy()[(gpu["launch_row"] >= 0).to_numpy()]
    if len(launched) and int(launched.max()) >= end:
        return []
    ops = tables.ops
    around = (
        (ops["tid"].astype(str).to_numpy() == tid)
        & (ops["start_ns"].to_numpy() <= start)
        & (ops["end_ns"].to_numpy() >= end)
        & ~category_mask(ops["name"], lambda n: n.startswith(_MARKER_PREFIXES))
    )
    frames = tables.frames
    framed = (
        (frames["tid"].astype(str).to_numpy() == tid)
        & (frames["start_ns"].to_numpy() <= start)
        & (frames["end_ns"].to_numpy() >= end)
    )
    return [] if around.any() or framed.any() else [last]


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


def _reads_frame(reads: pd.DataFrame) -> pd.DataFrame:
    """Grouped reads (sorted by start) -> READ_COLUMNS: kind, site and hint, named once per distinct
    (api, kinded op) and (frame, op) pair."""
    kind_of: dict[tuple[str, str], str] = {}
    kinds = []
    for api, op in zip(reads["api"].tolist(), reads["op_kind_name"].tolist(), strict=True):
        if (api, op) not in kind_of:
            kind_of[(api, op)] = classify_read([op] if op else [], api)
        kinds.append(kind_of[(api, op)])
    sites: dict[tuple[str, bool, str], str] = {}
    site_of = []
    for frame, open_at_start, op in zip(
        reads["site_frame"].tolist(), reads["site_open_at_start"].tolist(), reads["op"].tolist(), strict=True
    ):
        key = (frame, bool(open_at_start), op)
        if key not in sites:
            sites[key] = (
                site_text(frame, bool(open_at_start))
                if frame
                else (f"{NO_STACK_SITE} {op}".strip() if op else NO_STACK_SITE)
            )
        site_of.append(sites[key])
    frame = pd.DataFrame(
        {
            "read_id": np.arange(len(reads), dtype=np.int64),
            "tid": reads["tid"].to_numpy(dtype=object),
            "start_ns": reads["start_ns"].to_numpy(dtype=np.int64),
            "end_ns": reads["end_ns"].to_numpy(dtype=np.int64),
            "hold_start_ns": reads["hold_start_ns"].to_numpy(dtype=np.int64),
            "blocked_ns": reads["blocked_ns"].to_numpy(dtype=np.int64),
            "wait_ns": reads["wait_ns"].to_numpy(dtype=np.int64),
            "api": reads["api"].to_numpy(dtype=object),
            "op": reads["op"].to_numpy(dtype=object),
            "inner_op": reads["inner_op"].to_numpy(dtype=object),
            "kind": np.asarray(kinds, dtype=object),
            "site": np.asarray(site_of, dtype=object),
            "site_frame": reads["site_frame"].to_numpy(dtype=object),
            "hint": np.asarray([HINTS[k] for k in kinds], dtype=object),
            "calls": reads["calls"].to_numpy(dtype=np.int64),
        },
        columns=READ_COLUMNS,
    )
    return frame
