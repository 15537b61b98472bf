"""One built trace per rule of issue 14 §1-5, each with the answer worked out by hand from its events.

Times in the docstrings are µs. Rules: HIP names read like CUDA ones, implicit synchronizers are
reads of their own kind, bubblescope's own synchronize is not a read, a gap is cut where its closing
op's launch returns (dependency after a stream-wait), an op queued before tracing makes the leading
gap `outside`, steps come from Python frames / GPU annotations / ProfilerStep under schedule(), the
warm-up step stays out of the top gaps, and a def line is called a def line.
"""

from __future__ import annotations

from pathlib import Path

from bubblescope.analysis.traces import analyze_traces
from bubblescope.detect.host_blame import HostBlame
from bubblescope.trace.tables import build_tables
from tests.trace.builder import US, TraceBuilder

APP = "/home/user/app.py(12): step"


def _analyze(builder: TraceBuilder, tmp_path: Path, **kwargs) -> dict:
    return analyze_traces([builder.write(tmp_path / "trace.json")], **kwargs)


def _classes(result: dict) -> dict[str, int]:
    (device,) = result["devices"]
    return {k: v // US for k, v in device["idle_by_class_ns"].items()}


def _reads(result: dict) -> dict[str, dict]:
    return {s["kind"]: s for s in result["syncs"]}


def _hip_item() -> TraceBuilder:
    """Step [0,100]: kA hipLaunchKernel 5-10 runs 12-40; `.item()` (aten::item 20-50) is one
    synchronous hipMemcpyWithStream 22-45 whose memcpy runs 40-41; kC hipLaunchKernel 60-65 runs 67-80.

    Read: r0 20, blocked 23; the device drains at 41 -> L = min(41 - 20, 23) = 21. Gap [41,67): launch
    of kC returns at 65 -> host-bound [41,65) = sync 21 + host 3, launch [65,67) 2. Leading [0,12): host
    [0,10), launch [10,12). [80,100) outside. sync 21, host 13, launch 4, outside 20.
    """
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 100 * US)
    b.frame(APP, 0, 100 * US)
    b.kernel("kA", (5 * US, 10 * US), (12 * US, 40 * US), api="hipLaunchKernel")
    b.op("aten::item", 20 * US, 50 * US)
    b.op("aten::_local_scalar_dense", 21 * US, 49 * US)
    corr = b.runtime("hipMemcpyWithStream", 22 * US, 45 * US)
    b.gpu_op("Memcpy DtoH (Device -> Pinned)", 40 * US, 41 * US, corr=corr, kind="memcpy", nbytes=8)
    b.kernel("kC", (60 * US, 65 * US), (67 * US, 80 * US), api="hipLaunchKernel")
    return b


def test_hip_read_is_found_and_bounded_like_cuda(tmp_path: Path) -> None:
    result = _analyze(_hip_item(), tmp_path)
    assert _classes(result) == {"sync": 21, "host": 13, "launch": 4, "dependency": 0, "outside": 20}
    (read,) = result["syncs"]
    assert (read["op"], read["kind"], read["api"], read["site"]) == (
        "aten::item",
        "item",
        "hipMemcpyWithStream",
        "app.py(12): step",
    )
    assert (read["blocked_ns"], read["lost_lead_ns"], read["bubble_ns"]) == (23 * US, 21 * US, 21 * US)


def test_hip_graph_replay_maps_to_its_launch(tmp_path: Path) -> None:
    """hipGraphLaunch 5-40 with kernels 45-50, 51-60, 62-70: host [0,40), launch 5 + 1 + 2 = 8."""
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 100 * US)
    corr = b.runtime("hipGraphLaunch", 5 * US, 40 * US)
    for i, run in enumerate([(45, 50), (51, 60), (62, 70)]):
        b.gpu_op(f"graph_kernel_{i}", run[0] * US, run[1] * US, corr=corr)
    result = _analyze(b, tmp_path)
    assert result["devices"][0]["graph_launches"] == 1
    assert _classes(result) == {"sync": 0, "host": 40, "launch": 8, "dependency": 0, "outside": 30}


def _implicit_syncs() -> TraceBuilder:
    """Step [0,200], frame app.py(7): step open from 0. kA launched 2-5 runs 10-50.

    cudaFree 20-55 (no op): read kind free, r0 20, blocked 35; the device drains at 50 -> L = 30.
    kB launched 100-105 runs 107-120: host-bound [50,105) = sync 30 [50,80) + host 25; launch [105,107).
    In [80,105) the host polls cudaStreamQuery 82-84, 86-88, 90-92 (each with an Event Sync row: still
    not a read) and launches kB 100-105. After kB: cudaHostAlloc 130-140 (read host_alloc, device idle
    since 120: L 0), cudaMalloc 150-160 with a sync row (read malloc, L 0), cudaMalloc 170-175 without
    one (not a read). GPU interval [0,120): [120,200) outside. Leading [0,10): host 5, launch 5.
    sync 30, host 30, launch 7, outside 80.
    """
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 200 * US)
    b.frame("/home/user/app.py(7): step", 0, 200 * US)
    b.kernel("kA", (2 * US, 5 * US), (10 * US, 50 * US))
    b.runtime("cudaFree", 20 * US, 55 * US)
    for start in (82, 86, 90):
        poll = b.runtime("cudaStreamQuery", start * US, (start + 2) * US)
        b.wait_row("Event Sync", start * US + 200, start * US + 800, poll, stream=-1)
    b.kernel("kB", (100 * US, 105 * US), (107 * US, 120 * US))
    b.runtime("cudaHostAlloc", 130 * US, 140 * US)
    malloc = b.runtime("cudaMalloc", 150 * US, 160 * US)
    b.wait_row("Context Sync", 151 * US, 159 * US, malloc)
    b.runtime("cudaMalloc", 170 * US, 175 * US)
    return b


def test_implicit_synchronizers_are_reads_of_their_own_kind(tmp_path: Path) -> None:
    result = _analyze(_implicit_syncs(), tmp_path)
    assert _classes(result) == {"sync": 30, "host": 30, "launch": 7, "dependency": 0, "outside": 80}
    reads = _reads(result)
    assert set(reads) == {"free", "host_alloc", "malloc"}
    free = reads["free"]
    assert (free["api"], free["blocked_ns"], free["lost_lead_ns"], free["bubble_ns"]) == (
        "cudaFree",
        35 * US,
        30 * US,
        30 * US,
    )
    assert "empty_cache" in free["hint"]
    assert (reads["host_alloc"]["api"], reads["host_alloc"]["bubble_ns"]) == ("cudaHostAlloc", 0)
    assert (reads["malloc"]["count"], reads["malloc"]["bubble_ns"]) == (1, 0)
    host_gap = next(g for g in result["gaps_top"] if g["class"] == "host" and g["dur_ns"] == 25 * US)
    assert host_gap["blame"] == (
        "polling (cudaStreamQuery) 6.0us; cudaLaunchKernel 5.0us; rest: host in app.py(7): step"
    )


def test_the_tools_own_synchronize_is_not_the_users_read(tmp_path: Path) -> None:
    """Three cudaDeviceSynchronize calls: one under a `bubblescope.window_drain` annotation, one
    called from bubblescope/capture/profiled.py through torch.cuda.synchronize, one from the user's
    app.py. Only the user's is a read."""
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 100 * US)
    b.kernel("k", (1 * US, 2 * US), (3 * US, 10 * US))
    user = b.frame("/home/user/app.py(30): main", 0, 300 * US)
    b.frame("/home/user/app.py(40): drain", 20 * US, 30 * US, parent=user)
    b.device_synchronize(21 * US, 29 * US)
    b.annotation("bubblescope.window_drain", 110 * US, 130 * US)
    b.device_synchronize(112 * US, 128 * US)
    tool = b.frame(
        "/repo/bubblescope/capture/profiled.py(95): profile_window", 150 * US, 200 * US, parent=user
    )
    b.frame("torch/cuda/__init__.py(1000): synchronize", 160 * US, 190 * US, parent=tool)
    b.device_synchronize(165 * US, 185 * US)
    result = _analyze(b, tmp_path)
    (read,) = result["syncs"]
    assert (read["api"], read["site"], read["count"]) == (
        "cudaDeviceSynchronize",
        "drain (app.py, def line 40)",
        1,
    )


def test_gap_split_at_launch_then_dependency_on_the_stream_wait(tmp_path: Path) -> None:
    """Step [0,600] (ROCm-like, no sync rows). Stream 7: kA launched 1-3 runs 5-20. hipStreamWaitEvent
    25-26, then kB on stream 8 launched 30-32 runs 500-510. Gap [20,500): host-bound [20,32) 12, then
    queued after the stream wait: dependency [32,500) 468. Leading [0,5): host 3, launch 2. [510,600)
    outside 90."""
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 600 * US)
    b.kernel("kA", (1 * US, 3 * US), (5 * US, 20 * US), api="hipLaunchKernel")
    b.runtime("hipStreamWaitEvent", 25 * US, 26 * US)
    b.kernel("kB", (30 * US, 32 * US), (500 * US, 510 * US), stream=8, api="hipLaunchKernel")
    result = _analyze(b, tmp_path)
    assert _classes(result) == {"sync": 0, "host": 15, "launch": 2, "dependency": 468, "outside": 90}
    top = result["gaps_top"][0]
    assert (top["class"], top["start_ns"], top["dur_ns"]) == ("dependency", 32 * US, 468 * US)
    assert top["blame"] == "stream 8 waited on an event (hipStreamWaitEvent at 25.0us)"


def test_op_queued_before_tracing_makes_the_leading_gap_outside(tmp_path: Path) -> None:
    """Step [0,100]; k0 runs 40-60 with no launch in the trace (queued before tracing began: its
    correlation id is below every call's); k1 launched 55-58 runs 62-70. k0 belongs to no step: the
    step's GPU interval opens at its end (B_0 = 60) and holds k1 alone. [0,40) is outside, [60,62)
    launch (k1 queued at 58), [70,100) outside."""
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 100 * US)
    b.gpu_op("k0", 40 * US, 60 * US, corr=b.next_correlation())
    b.kernel("k1", (55 * US, 58 * US), (62 * US, 70 * US))
    result = _analyze(b, tmp_path)
    assert _classes(result) == {"sync": 0, "host": 0, "launch": 2, "dependency": 0, "outside": 70}
    (step,) = result["steps"]
    assert (step["gpu_start_ns"], step["gpu_dur_ns"], step["gpu_busy_ns"]) == (60 * US, 10 * US, 8 * US)
    assert step["kernels"] == 1


def test_read_that_begins_on_a_drained_device_costs_nothing(tmp_path: Path) -> None:
    """Step [0,200]: k launched 1-3 runs 5-20; the host does Python until aten::item 60-90 whose
    memcpyAsync 61-63 runs 65-66 and cudaStreamSynchronize 63-70; then k2 launched 150-155 runs
    157-170. The device drained at 20, before the read began (r0 = 60): L = 0, so all idle is host and
    launch: host [0,3) + [20,63) + [66,155) = 135, launch [3,5) + [63,65) + [155,157) = 6 (the read's
    own memcpy waited 2 µs after its launch returned)."""
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 200 * US)
    b.frame(APP, 0, 200 * US)
    b.kernel("k", (1 * US, 3 * US), (5 * US, 20 * US))
    b.blocking_read(
        ["aten::item"], (60 * US, 90 * US), (61 * US, 63 * US), (65 * US, 66 * US), (63 * US, 70 * US)
    )
    b.kernel("k2", (150 * US, 155 * US), (157 * US, 170 * US))
    result = _analyze(b, tmp_path)
    assert _classes(result) == {"sync": 0, "host": 135, "launch": 6, "dependency": 0, "outside": 30}
    (read,) = result["syncs"]
    assert (read["lost_lead_ns"], read["bubble_ns"], read["drained"]) == (0, 0, 0)


def test_host_bound_loop_spends_the_lost_lead_across_gaps(tmp_path: Path) -> None:
    """Picture 3. Step [0,300]: k0 launched 1-3 runs 5-60; aten::item 10-70 (memcpyAsync 11-13 runs
    60-61, sync 13-65): r0 10, blocked 52, drain at 61 -> L = min(51, 52) = 51. Then a host-bound loop:
    k1 launched 90-95 runs 96-100, k2 launched 130-135 runs 136-140, k3 launched 170-175 runs 176-180.
    Host-bound pieces [61,95) 34, [100,135) 35, [140,175) 35: sync 34 + 17, then host 18 + 35.
    Launch 1 each + leading [3,5) 2 = 5; leading host [0,3) 3. [180,300) outside."""
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 300 * US)
    b.frame(APP, 0, 300 * US)
    b.kernel("k0", (1 * US, 3 * US), (5 * US, 60 * US))
    b.blocking_read(
        ["aten::item"], (10 * US, 70 * US), (11 * US, 13 * US), (60 * US, 61 * US), (13 * US, 65 * US)
    )
    for i, start in enumerate((90, 130, 170)):
        b.kernel(f"k{i + 1}", (start * US, (start + 5) * US), ((start + 6) * US, (start + 10) * US))
    result = _analyze(b, tmp_path)
    assert _classes(result) == {"sync": 51, "host": 56, "launch": 5, "dependency": 0, "outside": 120}
    (read,) = result["syncs"]
    assert (read["blocked_ns"], read["lost_lead_ns"], read["bubble_ns"]) == (52 * US, 51 * US, 51 * US)


def test_def_line_is_called_a_def_line(tmp_path: Path) -> None:
    """A read inside decode.py's step_readback, entered while tracing (frame starts at 20 > 0): its
    line 70 is the def line. The enclosing main frame, open from the start, keeps its line."""
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 100 * US)
    main = b.frame("/home/user/run.py(5): main", 0, 100 * US)
    b.frame("/home/user/decode.py(70): step_readback", 20 * US, 50 * US, parent=main)
    b.kernel("k", (1 * US, 3 * US), (5 * US, 30 * US))
    b.blocking_read(
        ["aten::item"], (22 * US, 48 * US), (23 * US, 25 * US), (30 * US, 31 * US), (25 * US, 40 * US)
    )
    result = _analyze(b, tmp_path)
    (read,) = result["syncs"]
    assert read["site"] == "step_readback (decode.py, def line 70)"
    tables = build_tables(b.trace()["traceEvents"], {}, Path("t.json"), rank=0)
    blame = HostBlame(tables.ops, tables.frames, "4242", runtime=tables.runtime)
    # [60,90): only main encloses it, and main was open when tracing began: its line is real.
    origin = tables.origin_ns
    assert blame.blame(origin + 60 * US, origin + 90 * US) == "host in run.py(5): main"
    assert blame.blame(origin + 10 * US, origin + 30 * US).startswith(
        "step_readback (decode.py, def line 70)"
    )


def test_steps_from_python_frames(tmp_path: Path) -> None:
    """execute_model frames at [0,50] (with a nested runner execute_model [5,45]) and [60,110], each
    launching one kernel; no other markers. --step-marker execute_model: two steps from frames, the
    nested frame dropped without a warning."""
    b = TraceBuilder()
    outer = b.frame("/srv/engine.py(20): execute_model", 0, 50 * US)
    b.frame("/srv/runner.py(9): execute_model", 5 * US, 45 * US, parent=outer)
    b.kernel("k", (10 * US, 12 * US), (14 * US, 30 * US))
    b.frame("/srv/engine.py(20): execute_model", 60 * US, 110 * US)
    b.kernel("k", (70 * US, 72 * US), (74 * US, 90 * US))
    result = _analyze(b, tmp_path, step_marker="execute_model")
    assert result["step_source"] == "frame:execute_model"
    assert [(s["start_ns"], s["dur_ns"], s["kernels"]) for s in result["steps"]] == [
        (0, 50 * US, 1),
        (60 * US, 50 * US, 1),
    ]
    assert not any("overlapping" in w for w in result["warnings"])
    whole = _analyze(b, tmp_path / "full", step_marker="/srv/engine.py\\(20\\): execute_model")
    assert whole["step_source"].startswith("frame:") and len(whole["steps"]) == 2


def test_steps_from_gpu_annotations(tmp_path: Path) -> None:
    """Only GPU-side `decode_step` annotations [14,30] and [74,90]: two steps, source gpu_annotation."""
    b = TraceBuilder()
    b.kernel("k", (10 * US, 12 * US), (14 * US, 30 * US))
    b.kernel("k", (70 * US, 72 * US), (74 * US, 90 * US))
    b.gpu_annotation("decode_step", 14 * US, 30 * US)
    b.gpu_annotation("decode_step", 74 * US, 90 * US)
    result = _analyze(b, tmp_path, step_marker="decode_step")
    assert result["step_source"] == "gpu_annotation:decode_step"
    assert [s["dur_ns"] for s in result["steps"]] == [16 * US, 16 * US]


def test_profiler_steps_under_schedule(tmp_path: Path) -> None:
    """schedule(wait=1, warmup=1, active=3) records ProfilerStep#2..#4, each written both as a cpu_op
    and as a user_annotation over the same range: three steps, no warning."""
    b = TraceBuilder()
    for n in range(3):
        start = n * 100 * US
        b.op(f"ProfilerStep#{n + 2}", start, start + 100 * US)
        b.annotation(f"ProfilerStep#{n + 2}", start, start + 100 * US)
        b.kernel("k", (start + 10 * US, start + 12 * US), (start + 14 * US, start + 60 * US))
    result = _analyze(b, tmp_path)
    assert result["step_source"] == "ProfilerStep"
    assert [s["name"] for s in result["steps"]] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    assert result["warnings"] == []


def test_warm_up_step_stays_out_of_the_top_gaps(tmp_path: Path) -> None:
    """Step 0 [0,2000] launches k at 1500-1502 (runs 1504-1990: a 1500 µs host gap at the start);
    steps 1-3 [2000+100 i, 2100+100 i] each launch one kernel 20 µs in (host gaps of 30-40 µs). Step 0
    is 20x the median step: it is left out of the per-step summary and of the top gaps."""
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 2000 * US)
    b.kernel("k", (1500 * US, 1502 * US), (1504 * US, 1990 * US))
    for i in range(3):
        start = (2000 + 100 * i) * US
        b.annotation("bubblescope.step", start, start + 100 * US)
        b.kernel("k", (start + 20 * US, start + 22 * US), (start + 24 * US, start + 80 * US))
    result = _analyze(b, tmp_path)
    assert result["summary"]["outlier_steps"] == 1
    assert result["gaps_top"] and all(g["step"] not in (0, -1) for g in result["gaps_top"])
    assert max(g["dur_ns"] for g in result["gaps_top"]) < 100 * US


def test_launches_under_stream_capture_are_not_missing_kernels(tmp_path: Path) -> None:
    """20 hipLaunchKernel calls between hipStreamBeginCapture and hipStreamEndCapture run nothing (they
    are recorded into a graph), and two kernels run outside the capture: the trace is whole. The same
    20 launches outside a capture, with no kernel, are GPU activity missing."""

    def build(capture: bool) -> TraceBuilder:
        b = TraceBuilder()
        b.annotation("bubblescope.step", 0, 400 * US)
        b.kernel("k", (1 * US, 3 * US), (5 * US, 10 * US), api="hipLaunchKernel")
        if capture:
            b.runtime("hipStreamBeginCapture", 20 * US, 21 * US)
        for i in range(20):
            b.runtime("hipLaunchKernel", (30 + 10 * i) * US, (32 + 10 * i) * US)
        if capture:
            b.runtime("hipStreamEndCapture", 250 * US, 251 * US)
        b.kernel("k", (260 * US, 262 * US), (264 * US, 270 * US), api="hipLaunchKernel")
        return b

    captured = _analyze(build(True), tmp_path / "captured")
    assert captured["gpu_measured"] and captured["warnings"] == []
    missing = _analyze(build(False), tmp_path / "missing")
    assert not missing["gpu_measured"]
    assert any("only 2 of 22 kernel launches" in w for w in missing["warnings"])


def test_a_read_draining_two_devices_is_blamed_for_its_lead_once(tmp_path: Path) -> None:
    """`item_sync` with every GPU op also on device 1 (same launches): the read (blocked 21, lead 21)
    drains both devices. Its sync idle over both stays within its lead: 21 on device 0, 0 on device 1
    (there [41,65) is host-bound: host 24)."""
    from tests.trace import scenarios

    b = scenarios.item_sync()
    copies = []
    for event in b.events:
        if event["cat"] in ("kernel", "gpu_memcpy"):
            copies.append({**event, "pid": 1, "args": {**event["args"], "device": 1}})
    b.events.extend(copies)
    result = _analyze(b, tmp_path)
    by_device = {d["device"]: d["idle_by_class_ns"] for d in result["devices"]}
    assert (by_device[0]["sync"], by_device[1]["sync"]) == (21 * US, 0)
    assert by_device[1]["host"] == by_device[0]["host"] + 21 * US
    (read,) = result["syncs"]
    assert (read["blocked_ns"], read["lost_lead_ns"], read["bubble_ns"]) == (21 * US, 21 * US, 21 * US)


def test_a_later_read_that_drains_again_ends_the_earlier_reads_blame(tmp_path: Path) -> None:
    """The H100 Qwen pattern. Step [0,400]: k0 launched 1-3 runs 5-100; cudaDeviceSynchronize 10-102
    (r0 10, blocked 92) drains the device at 100: L = 90. Then aten::item 150-190 begins on the drained
    device (L 0), but its own copy (launched 151-153, runs 155-156) drains it again at 156: that ends
    the first read's blame. Gap [100,155): host-bound [100,153) = sync 53, launch 2. Gap [156,257)
    (k1 launched 250-255): host 99, launch 2, although 37 µs of the first read's lead are unspent.
    Leading host 3 + launch 2; [280,400) outside. sync 53, host 102, launch 6, outside 120."""
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 400 * US)
    b.frame(APP, 0, 400 * US)
    b.kernel("k0", (1 * US, 3 * US), (5 * US, 100 * US))
    b.device_synchronize(10 * US, 102 * US)
    b.blocking_read(
        ["aten::item"], (150 * US, 190 * US), (151 * US, 153 * US), (155 * US, 156 * US), (153 * US, 160 * US)
    )
    b.kernel("k1", (250 * US, 255 * US), (257 * US, 280 * US))
    result = _analyze(b, tmp_path)
    assert _classes(result) == {"sync": 53, "host": 102, "launch": 6, "dependency": 0, "outside": 120}
    reads = _reads(result)
    assert (reads["synchronize"]["lost_lead_ns"], reads["synchronize"]["bubble_ns"]) == (90 * US, 53 * US)
    assert (reads["item"]["lost_lead_ns"], reads["item"]["bubble_ns"]) == (0, 0)


def test_a_gpu_clock_behind_the_host_clock_is_tolerated(tmp_path: Path) -> None:
    """The MI300X Qwen pattern: hipDeviceSynchronize 10-100 returns while its last kernel k0 (launched
    1-3) 'ends' at 107.5 on the GPU clock: the GPU clock lags 7.5 µs. The drain at 107.5 is matched to
    the read (r0 10, blocked 90): L = min(97.5, 90) = 90. k1 launched 150-155 runs 157-170: [107.5,155)
    is sync 47.5, launch 2. Leading host 3 + launch 2; [170,200) outside."""
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 200 * US)
    b.frame(APP, 0, 200 * US)
    b.kernel("k0", (1 * US, 3 * US), (5 * US, 107_500), api="hipLaunchKernel")
    b.runtime("hipDeviceSynchronize", 10 * US, 100 * US)
    b.kernel("k1", (150 * US, 155 * US), (157 * US, 170 * US), api="hipLaunchKernel")
    result = _analyze(b, tmp_path)
    (device,) = result["devices"]
    assert device["idle_by_class_ns"] == {
        "sync": 47_500,
        "host": 3 * US,
        "launch": 4 * US,
        "dependency": 0,
        "outside": 30 * US,
    }
    (read,) = result["syncs"]
    assert (read["api"], read["kind"], read["lost_lead_ns"], read["bubble_ns"]) == (
        "hipDeviceSynchronize",
        "synchronize",
        90 * US,
        47_500,
    )


def test_pageable_host_to_device_copy_is_not_a_read(tmp_path: Path) -> None:
    """aten::to 10-20 with cudaMemcpyAsync 11-19 whose GPU copy is 'Memcpy HtoD (Pageable -> Device)'
    (the driver staged the source and returned) is not a read; aten::to 40-60 whose copy is
    'Memcpy DtoH (Device -> Pageable)' is."""
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 100 * US)
    b.frame(APP, 0, 100 * US)
    b.op("aten::to", 10 * US, 20 * US)
    corr = b.runtime("cudaMemcpyAsync", 11 * US, 19 * US)
    b.gpu_op("Memcpy HtoD (Pageable -> Device)", 21 * US, 22 * US, corr=corr, kind="memcpy", nbytes=64)
    b.op("aten::to", 40 * US, 60 * US)
    corr = b.runtime("cudaMemcpyAsync", 41 * US, 58 * US)
    b.gpu_op("Memcpy DtoH (Device -> Pageable)", 50 * US, 51 * US, corr=corr, kind="memcpy", nbytes=64)
    result = _analyze(b, tmp_path)
    (read,) = result["syncs"]
    assert (read["op"], read["kind"], read["api"], read["blocked_ns"]) == (
        "aten::to",
        "copy",
        "cudaMemcpyAsync",
        17 * US,
    )


def test_read_under_a_torchscript_forward_is_the_aten_op(tmp_path: Path) -> None:
    """No Python frames (TorchScript): `forward` 0-100 holds two `.item()` reads (aten::item 10-30 and
    60-80, each with aten::_local_scalar_dense, a memcpyAsync and a cudaStreamSynchronize): two reads
    of op aten::item, not one read of op `forward`."""
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 100 * US)
    b.op("forward", 0, 100 * US)
    b.kernel("k", (1 * US, 3 * US), (5 * US, 15 * US))
    for start in (10, 60):
        t = start * US
        b.blocking_read(
            ["aten::item", "aten::_local_scalar_dense"],
            (t, t + 20 * US),
            (t + 2 * US, t + 4 * US),
            (t + 15 * US, t + 16 * US),
            (t + 4 * US, t + 17 * US),
        )
    result = _analyze(b, tmp_path)
    (read,) = result["syncs"]
    assert (read["op"], read["kind"], read["count"]) == ("aten::item", "item", 2)


def test_an_op_queued_for_milliseconds_without_evidence_is_not_a_dependency(tmp_path: Path) -> None:
    """Stream 7: kA launched 1-3 runs 5-20; kB launched 6-8 (queued) runs 2020-2030; kC launched 9-10
    runs 2040-2050 (queued, 10 µs after kB). [20,2020) is a 2 ms queued gap on the running stream with
    no stream-wait call and no other stream: nothing in the trace shows a dependency (issue 23 §4), so
    it is `launch`, named as a long queue, never "waited on another stream or event". [2030,2040) is
    launch latency. Leading host 3, launch 2."""
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 2100 * US)
    b.kernel("kA", (1 * US, 3 * US), (5 * US, 20 * US))
    b.kernel("kB", (6 * US, 8 * US), (2020 * US, 2030 * US))
    b.kernel("kC", (9 * US, 10 * US), (2040 * US, 2050 * US))
    result = _analyze(b, tmp_path)
    assert _classes(result) == {"sync": 0, "host": 3, "launch": 2012, "dependency": 0, "outside": 50}
    top = result["gaps_top"][0]
    assert (top["class"], top["dur_ns"]) == ("launch", 2000 * US)
    assert top["blame"].startswith("queued over 1 ms on stream 7 with no stream wait")
    assert "waited" not in top["blame"]


def test_late_kernel_after_a_module_load_is_a_named_launch_tail(tmp_path: Path) -> None:
    """kA runs 5-20; kB's launch call 6-1506 took 1.5 ms (the driver loading its module), kB runs
    1600-1610 on the same stream, no waits: [20,1506) is host-bound (kB not issued), [1506,1600) is
    queued with a module load in the gap: `launch`, named a module load tail."""
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 1700 * US)
    b.kernel("kA", (1 * US, 3 * US), (5 * US, 20 * US))
    b.kernel("kB", (6 * US, 1506 * US), (1600 * US, 1610 * US))
    result = _analyze(b, tmp_path)
    classes = _classes(result)
    assert (classes["dependency"], classes["launch"]) == (0, 2 + 94)
    tail = next(g for g in result["gaps_top"] if g["class"] == "launch" and g["dur_ns"] == 94 * US)
    assert tail["blame"].startswith("module load tail")


def test_queued_on_another_stream_after_its_op_is_a_dependency(tmp_path: Path) -> None:
    """kA on stream 7 runs 5-20; kB on stream 8 launched 6-8 runs 60-70, no wait call: the whole gap
    [20,60) was queued and the op whose end opened it ran on another stream: dependency, naming both."""
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 100 * US)
    b.kernel("kA", (1 * US, 3 * US), (5 * US, 20 * US))
    b.kernel("kB", (6 * US, 8 * US), (60 * US, 70 * US), stream=8)
    result = _analyze(b, tmp_path)
    assert _classes(result)["dependency"] == 40
    top = result["gaps_top"][0]
    assert top["blame"] == "stream 8 waited on stream 7 (its op ended as the gap began)"


def test_an_implicit_synchronizer_inside_a_read_is_its_own_read(tmp_path: Path) -> None:
    """aten::item 10-50 first allocates its pinned buffer (hipHostMalloc 12-30, longer than the copy)
    then copies synchronously (hipMemcpyWithStream 32-45): two reads, the item read with the copy as
    its API, and a host_alloc read, not one read called hipHostMalloc."""
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 100 * US)
    b.frame(APP, 0, 100 * US)
    b.kernel("k", (1 * US, 3 * US), (5 * US, 40 * US), api="hipLaunchKernel")
    b.op("aten::item", 10 * US, 50 * US)
    b.runtime("hipHostMalloc", 12 * US, 30 * US)
    corr = b.runtime("hipMemcpyWithStream", 32 * US, 45 * US)
    b.gpu_op("Memcpy DtoH (Device -> Pinned)", 41 * US, 42 * US, corr=corr, kind="memcpy", nbytes=8)
    result = _analyze(b, tmp_path)
    reads = _reads(result)
    assert set(reads) == {"item", "host_alloc"}
    assert (reads["item"]["api"], reads["item"]["blocked_ns"]) == ("hipMemcpyWithStream", 13 * US)
    assert (reads["host_alloc"]["op"], reads["host_alloc"]["api"]) == ("aten::item", "hipHostMalloc")


def test_reads_inside_other_bubblescope_ranges_are_the_users(tmp_path: Path) -> None:
    """A `bubblescope.read#3` range (the profile session's exact-line marker) around a user's
    cudaDeviceSynchronize keeps it a read; `bubblescope.own_sync` around another drops it."""
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 100 * US)
    b.frame(APP, 0, 100 * US)
    b.kernel("k", (1 * US, 2 * US), (3 * US, 10 * US))
    b.annotation("bubblescope.read#3", 20 * US, 40 * US)
    b.device_synchronize(22 * US, 38 * US)
    b.annotation("bubblescope.own_sync", 60 * US, 80 * US)
    b.device_synchronize(62 * US, 78 * US)
    result = _analyze(b, tmp_path)
    (read,) = result["syncs"]
    assert (read["api"], read["count"], read["blocked_ns"]) == ("cudaDeviceSynchronize", 1, 16 * US)
