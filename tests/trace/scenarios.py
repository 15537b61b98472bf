"""Built trace scenarios, one per gap class or format quirk, with the numbers a correct analysis gives.

Each function returns a TraceBuilder; the expected values are worked out by hand in the docstrings
(times in µs). `python -m tests.trace.scenarios` rewrites tests/data/<scenario>/trace.json.
"""

from __future__ import annotations

from pathlib import Path

from tests.trace.builder import US, TraceBuilder

ITEM_OPS = ["aten::item", "aten::_local_scalar_dense"]


def item_sync(builder: TraceBuilder | None = None, step_name: str = "bubblescope.step") -> TraceBuilder:
    """One step [0,100]: kA 12-40, `.item()` (copy 40-41, sync call 24-45), kC launched 60-65 runs 67-80.

    Gaps: [0,12) host, [41,67) sync (blamed on app.py(12): step), [80,100) host.
    busy 42, idle 58 = sync 26 + host 32. Read: blocked 21 (the sync call; the pinned copy is async),
    GPU-side wait row 19.
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
    """Step [0,200]: a read returns at 25; k1 (host-bound) -> sync gap [21,47); k2 is queued ahead
    (launch ends 55, device free at 100) -> the host regained its lead, launch gap [100,101); k3
    host-bound after that -> plain host gap [110,137) blamed on aten::add.

    sync 26, launch 1, host 5 + 27 + 50 = 82, busy 91.
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

    Gaps: [0,45) host, [50,51) and [60,62) launch (inside the replay), [70,100) host.
    host 75, launch 3, busy 22; all three kernels map to the one launch.
    """
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 100 * US)
    b.graph_replay((5 * US, 40 * US), [(45 * US, 50 * US), (51 * US, 60 * US), (62 * US, 70 * US)])
    return b


def two_streams() -> TraceBuilder:
    """Step [0,200]; stream 7: kA 5-50, kA2 74-80 (launched 70-72), kA3 81-90, kA4 130-135 (queued);
    stream 8: kB 53-60, queued behind an event wait on kA.

    Device: host 5 + 14 + 65 = 84, dependency [50,53) = 3, launch 1 + 40 = 41, busy 72.
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

    The gap [40,90) is host-bound: [40,50) host (step 0), [50,70) outside, [70,90) host (step 1).
    host 5 + 10 + 20 + 10 = 45, outside 20, busy 55, span 120.
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
    after the nonzero read with no regained lead: sync 34 blamed on nonzero; [0,5) and [56,100) host.
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
}


def write_all(root: Path) -> None:
    """Write every scenario to root/<name>/trace.json."""
    for name, make in SCENARIOS.items():
        make().write(root / name / "trace.json")


if __name__ == "__main__":
    write_all(Path(__file__).resolve().parents[1] / "data")
