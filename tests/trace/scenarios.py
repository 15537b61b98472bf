"""Built trace scenarios, one per gap class or format quirk, with the numbers a correct analysis gives.

Each function returns a TraceBuilder; the expected values are worked out by hand in the docstrings
(times in µs). A step's GPU interval runs from B_0 (its host start, for step 0) or the end of the
previous step's GPU work to the end of the last op launched in its host window (E_i); idle outside
[B_0, E_last) is `outside`. `python -m tests.trace.scenarios` rewrites tests/data/<scenario>/trace.json.
"""

from __future__ import annotations

from pathlib import Path

from tests.trace.builder import US, TraceBuilder

ITEM_OPS = ["aten::item", "aten::_local_scalar_dense"]


def item_sync(builder: TraceBuilder | None = None, step_name: str = "bubblescope.step") -> TraceBuilder:
    """One step [0,100]: kA 12-40, `.item()` (copy 40-41, sync call 24-45), kC launched 60-65 runs 67-80.

    GPU interval [0,80) (B_0 = host start 0, E_0 = end of kC). Gaps, cut where the closing op's launch
    returns: [0,10) host + [10,12) launch; [41,65) host-bound + [65,67) launch; [80,100) outside.
    Read: r0 20 (aten::item), blocked 21 (the sync call; the pinned copy is async), GPU-side wait row
    19; the device drains at 41 -> lost lead L = min(41 - 20, 21) = 21: [41,62) sync (blamed on
    app.py(12): step), [62,65) host.
    busy 42, idle 58 = sync 21 + host 13 + launch 4 + outside 20; step: gpu_dur 80 = busy 42 + idle 38.
    """
    b = builder or TraceBuilder()
    b.annotation(step_name, 0, 100 * US) if not b.legacy else b.op(step_name, 0, 100 * US)
    step_frame = b.frame("/home/user/app.py(12): step", 0, 100 * US)
    b.frame("<built-in method item of Tensor object at 0x7f>", 20 * US, 50 * US, parent=step_frame)
    b.kernel("kA", (5 * US, 10 * US), (12 * US, 40 * US))
    b.blocking_read(ITEM_OPS, (20 * US, 50 * US), (21 * US, 24 * US), (40 * US, 41 * US), (24 * US, 45 * US))
    b.op("aten::add", 60 * US, 66 * US)
    b.kernel("kC", (60 * US, 65 * US), (67 * US, 80 * US))
    return b


def regained_lead() -> TraceBuilder:
    """Step [0,200]: a read (aten::item 6-30, sync 9-25: r0 6, blocked 16) drains the device at 21 ->
    L = min(15, 16) = 15; k1 launched 40-45 -> [21,45) host-bound = sync 15 + host 9, [45,47) launch;
    k2 is queued ahead (launch ends 55, device free at 100) -> the host regained its lead, launch gap
    [100,101); k3 host-bound after that -> plain host [110,135) blamed on aten::add, [135,137) launch.

    GPU interval [0,150) (k3 ends last); [150,200) is outside. Leading [0,3) host, [3,5) launch.
    sync 15, launch 7, host 3 + 9 + 25 = 37, outside 50, busy 91; step: gpu_dur 150 = 91 + 59.
    """
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 200 * US)
    b.frame("app.py(30): step", 0, 200 * US)
    b.kernel("k0", (1 * US, 3 * US), (5 * US, 20 * US))
    b.blocking_read(ITEM_OPS, (6 * US, 30 * US), (7 * US, 9 * US), (20 * US, 21 * US), (9 * US, 25 * US))
    b.kernel("k1", (40 * US, 45 * US), (47 * US, 100 * US))
    b.kernel("k2", (50 * US, 55 * US), (101 * US, 110 * US))
    b.op("aten::add", 115 * US, 129 * US)
    b.kernel("k3", (130 * US, 135 * US), (137 * US, 150 * US))
    return b


def graph_replay() -> TraceBuilder:
    """Step [0,100]: one cudaGraphLaunch 5-40 whose three kernels run 45-50, 51-60, 62-70.

    Gaps: [0,40) host, [40,45) launch (the replay was queued when its launch returned), [50,51) and
    [60,62) launch (inside the replay), [70,100) outside (GPU interval [0,70)). host 40, launch 8,
    outside 30, busy 22; all three kernels map to the one launch.
    """
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 100 * US)
    b.graph_replay((5 * US, 40 * US), [(45 * US, 50 * US), (51 * US, 60 * US), (62 * US, 70 * US)])
    return b


def two_streams() -> TraceBuilder:
    """Step [0,200]; stream 7: kA 5-50, kA2 74-80 (launched 70-72), kA3 81-90, kA4 130-135 (queued);
    stream 8: kB 53-60, queued behind an event wait on kA.

    GPU interval [0,135) (kA4 ends last). Device: host [0,3) + [60,72) = 15, dependency [50,53) = 3
    (kB queued behind cudaStreamWaitEvent at 4.0), launch [3,5) + [72,74) + 1 + 40 = 45, outside
    [135,200) = 65, busy 72.
    Stream 7 (HTA view): span 130, busy 65, host wait 24, kernel wait 1, other 40.
    """
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 200 * US)
    b.kernel("kA", (1 * US, 3 * US), (5 * US, 50 * US))
    b.runtime("cudaEventRecord", 3500, 3800)
    wait_corr = b.runtime("cudaStreamWaitEvent", 4000, 4500)
    b.wait_row("Stream Wait Event", 5 * US, 53 * US, wait_corr, stream=8)
    b.kernel("kB", (4600, 6 * US), (53 * US, 60 * US), stream=8)
    b.kernel("kA2", (70 * US, 72 * US), (74 * US, 80 * US))
    b.kernel("kA3", (72500, 73 * US), (81 * US, 90 * US))
    b.kernel("kA4", (73200, 73500), (130 * US, 135 * US))
    return b


def outside_steps() -> TraceBuilder:
    """Steps [0,50] and [70,120]; k 5-40, k2 launched 80-85 runs 90-110.

    GPU intervals: step 0 [0,40) (B_0 = 0, E_0 = end of k), step 1 [40,110) (E_1 = end of k2). The
    host-bound gap [40,85) between the steps' host windows delays k2, so it is step 1's: host 45 and
    launch [85,90) 5 there; [0,3) host and [3,5) launch in step 0; [110,120) outside. host 48, launch 7,
    outside 10, busy 55, span 120.
    Steps: gpu_dur 40 = busy 35 + idle 5, gpu_dur 70 = busy 20 + idle 50.
    """
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 50 * US)
    b.annotation("bubblescope.step", 70 * US, 120 * US)
    b.kernel("k", (1 * US, 3 * US), (5 * US, 40 * US))
    b.kernel("k2", (80 * US, 85 * US), (90 * US, 110 * US))
    return b


def copies_and_nonzero() -> TraceBuilder:
    """Step [0,100]: aten::nonzero (copy 20-21, sync call 14-25) and aten::to to pageable memory at
    53-60 (no sync call: the pageable copy itself blocks). The gap [21,55) before the copy is host-bound
    after the nonzero read (r0 10, blocked 11, drains at 21: L = 11): sync 11 blamed on nonzero, host
    23; the copy's read began (r0 50) on the drained device: L 0. [0,3) host, [3,5) launch; GPU
    interval [0,56) (the pageable copy ends last), so [56,100) is outside.
    """
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 100 * US)
    b.frame("model.py(7): decode", 0, 100 * US)
    b.kernel("k", (1 * US, 3 * US), (5 * US, 20 * US))
    b.blocking_read(
        ["aten::nonzero"], (10 * US, 40 * US), (11 * US, 14 * US), (20 * US, 21 * US), (14 * US, 25 * US)
    )
    b.blocking_read(
        ["aten::to", "aten::_to_copy", "aten::copy_"],
        (50 * US, 70 * US),
        (53 * US, 60 * US),
        (55 * US, 56 * US),
        None,
        memcpy_name="Memcpy DtoH (Device -> Pageable)",
    )
    return b


def quirks(legacy: bool) -> TraceBuilder:
    """`item_sync` under ProfilerStep#3 plus a torch.cuda.synchronize(), written either as a modern
    trace or as an old one (Operator/Runtime/Kernel names, integer µs, sync rows on virtual
    `stream + 1000000` threads, Context Sync on stream 4294967295). Both must analyse identically."""
    b = TraceBuilder(
        legacy=legacy,
        int_us=legacy,
        sync_rows="virtual" if legacy else "stream",
        context_stream=4294967295 if legacy else -1,
    )
    item_sync(b, step_name="ProfilerStep#3")
    b.device_synchronize(85 * US, 95 * US)
    return b


def event_polls() -> TraceBuilder:
    """Step [0,100]: kA launched 2-5 runs 10-30; inside aten::mm (8-12) the caching allocator polls
    with cudaEventQuery 8-10, and the host polls cudaStreamQuery 13-14, each paired by CUPTI with an
    "Event Sync" row; then cudaEventSynchronize 15-31 (Event Sync row 16-30) really waits; kB launched
    40-45 runs 47-60.

    Reads: only the cudaEventSynchronize (kind event, blocked 16, wait 14, site app.py(20): step);
    the polls return at once whatever the device state. GPU interval [0,60): [0,5) host, [5,10)
    launch; the wait (r0 15, blocked 16) drains the device at 30: L = 15, so [30,45) sync 15 and
    [45,47) launch (kB's launch returned at 45); [60,100) outside 40; busy 33.
    """
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 100 * US)
    b.frame("/home/user/app.py(20): step", 0, 100 * US)
    b.kernel("kA", (2 * US, 5 * US), (10 * US, 30 * US))
    b.runtime("cudaEventRecord", 6 * US, 7 * US)
    b.op("aten::mm", 8 * US, 12 * US)
    query = b.runtime("cudaEventQuery", 8 * US, 10 * US)
    b.wait_row("Event Sync", 8500, 9500, query, stream=-1)
    stream_query = b.runtime("cudaStreamQuery", 13 * US, 14 * US)
    b.wait_row("Event Sync", 13200, 13800, stream_query, stream=-1)
    wait = b.runtime("cudaEventSynchronize", 15 * US, 31 * US)
    b.wait_row("Event Sync", 16 * US, 30 * US, wait, stream=-1)
    b.kernel("kB", (40 * US, 45 * US), (47 * US, 60 * US))
    return b


def run_ahead() -> TraceBuilder:
    """Host run-ahead: steps [0,30], [30,60], [60,90] each replay one graph of three kernels (launches
    5-15, 35-45, 65-75) and poll the pinned readback (cudaEventQuery + Event Sync row: not a read).
    The host enqueues step k+1 before the GPU finished step k:
        step 0 kernels 17-37, 38-50, 51-57; step 1 58-78, 79-91, 92-98; step 2 99-119, 120-132, 133-139.

    GPU intervals by launch: B_0 = 0, E_0 = 57, E_1 = 98, E_2 = 139 -> step 0 [0,57), step 1 [57,98),
    step 2 [98,139). Gaps: [0,15) host and [15,17) launch (step 0); launch gaps of 1 at 37, 50
    (step 0), 57, 78, 91 (step 1), 98, 119, 132 (step 2); the first kernel of replays 1 and 2 was
    queued (launch returned at 45 <= 57, 75 <= 98) so those gaps are launch too. Steps: gpu_dur
    57/41/41, idle 19/3/3 (host 15 in step 0), busy 38 each. Device: span 139, busy 114, host 15,
    launch 10, outside 0.
    Host windows alone would show step 1 busy 28 of 30 µs although the GPU needs 41 µs per step.
    """
    b = TraceBuilder()
    kernels = [(17, 37), (38, 50), (51, 57), (58, 78), (79, 91), (92, 98), (99, 119), (120, 132), (133, 139)]
    for k in range(3):
        host_ns = k * 30 * US
        b.annotation("bubblescope.step", host_ns, host_ns + 30 * US)
        runs = [(start * US, end * US) for start, end in kernels[3 * k : 3 * k + 3]]
        b.graph_replay((host_ns + 5 * US, host_ns + 15 * US), runs)
        poll = b.runtime("cudaEventQuery", host_ns + 20 * US, host_ns + 22 * US)
        b.wait_row("Event Sync", host_ns + 20500, host_ns + 21500, poll, stream=-1)
    return b


def graph_without_kernels() -> TraceBuilder:
    """Three cudaGraphLaunch calls and no GPU kernels: implausible, GPU idle must not be reported."""
    b = TraceBuilder()
    for i in range(3):
        b.annotation("bubblescope.step", i * 100 * US, (i + 1) * 100 * US)
        b.runtime("cudaGraphLaunch", (i * 100 + 5) * US, (i * 100 + 40) * US)
    return b


SCENARIOS = {
    "item_sync": item_sync,
    "regained_lead": regained_lead,
    "graph_replay": graph_replay,
    "two_streams": two_streams,
    "outside_steps": outside_steps,
    "copies_and_nonzero": copies_and_nonzero,
    "legacy_format": lambda: quirks(legacy=True),
    "graph_without_kernels": graph_without_kernels,
    "event_polls": event_polls,
    "run_ahead": run_ahead,
}


def write_all(root: Path) -> None:
    """Write every scenario to root/<name>/trace.json."""
    for name, make in SCENARIOS.items():
        make().write(root / name / "trace.json")


if __name__ == "__main__":
    write_all(Path(__file__).resolve().parents[1] / "data")
