"""What tracing adds to the host, per call kind, and to a decode step (issue 23 §1).

Each call kind runs in a microloop twice per repeat, in alternating order: bare, and inside the profiler
`bubblescope run` uses (`capture.profiled._profiler_kwargs`: torch.profiler CPU + CUDA activities,
`with_stack`, `record_shapes`, CUDA sync events). Host time per call is `perf_counter_ns` around a block
of calls divided by the block; launches are synchronised between blocks (outside the timing) so the
queue never fills. Kinds:

  aten_cpu            an ATen op on a CPU tensor (`add_`): the op-recording cost alone
  cudaLaunchKernel    an ATen op that launches one kernel (`add_` on a CUDA tensor)
  cuLaunchKernelEx    a Triton kernel launch (driver launch, Triton's Python launcher; no ATen op)
  cudaGraphLaunch_N   `CUDAGraph.replay()` of a graph of N kernel nodes (each replay timed alone and
                      synchronised after: does the launch's host time grow with N under tracing?)
  cudaMemcpyAsync     a 4 KiB device-to-device `copy_` (ATen op + memcpy call)
  cudaMemcpyAsync_d2h a 4 KiB device-to-pinned `copy_(non_blocking=True)`
  synchronize         `torch.cuda.synchronize()` on an idle device
  python_frame        a call of an empty Python function (one frame under `with_stack`)
  record_function     an empty `record_function` range (bubblescope writes one per step)

Then the reference decode loop, `ling3-tiny` with every usable switch (`bubblescope run --preset
ling3-tiny --all`) and with none: timed steps (`capture.timed.run_timed`, CUDA events at step
boundaries, nothing syncing between) against profiled steps (the same event timing inside the same
profiler with a `record_function` per step), and one `capture.profiled.profile_window` trace of each,
analysed, for the profiled-over-timed ratio `run` records. The traces come back for the analysis here.

    python benchmarks/bench_profiler_overhead.py OUT_DIR [--repeats 5] [--calls 1000] [--dry-run]

`--dry-run` (also what runs without CUDA): CPU kinds only, few calls, the `debug` preset on CPU; it
exercises every code path so the one device call works.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bubblescope.capture.profiled import _profiler_kwargs, profile_window
from bubblescope.capture.timed import reset_if_possible, run_timed
from bubblescope.files.atomic import write_json_atomic

GRAPH_SIZES = (1, 8, 64, 512)
# Stop starting new decode-loop measurements after this many seconds (the device call is capped).
TIME_BUDGET_S = 200.0
# Calls timed as one block (launches are synchronised between blocks, outside the timing).
BLOCK = 50


def _timed_block(call: Callable[[], Any], n: int, sync: Callable[[], None]) -> float:
    """Host ns per call over n calls."""
    sync()
    start = time.perf_counter_ns()
    for _ in range(n):
        call()
    elapsed = time.perf_counter_ns() - start
    sync()
    return elapsed / n


def _per_call(call: Callable[[], Any], n: int, sync: Callable[[], None], block: int) -> float:
    """Median over blocks of host ns per call (block 1: each call alone, synchronised after)."""
    return statistics.median(_timed_block(call, block, sync) for _ in range(max(n // block, 1)))


def _empty() -> None:
    return None


def microloops(on_cuda: bool) -> dict[str, tuple[Callable[[], Any], int]]:
    """Call kind -> (one call, block size). CUDA kinds only with a GPU."""
    from torch.profiler import record_function

    cpu = torch.zeros(1)

    def in_range() -> None:
        with record_function("bubblescope.bench"):
            pass

    loops: dict[str, tuple[Callable[[], Any], int]] = {
        "aten_cpu": (lambda: cpu.add_(1), BLOCK),
        "python_frame": (_empty, BLOCK),
        "record_function": (in_range, BLOCK),
    }
    if not on_cuda:
        return loops
    dev = torch.zeros(1, device="cuda")
    src = torch.zeros(1024, device="cuda")
    dst = torch.empty_like(src)
    pinned = torch.empty(1024, pin_memory=True)
    loops["cudaLaunchKernel"] = (lambda: dev.add_(1), BLOCK)
    loops["cuLaunchKernelEx"] = (_triton_launcher(dev), BLOCK)
    loops["cudaMemcpyAsync"] = (lambda: dst.copy_(src), BLOCK)
    loops["cudaMemcpyAsync_d2h"] = (lambda: pinned.copy_(src, non_blocking=True), BLOCK)
    loops["synchronize"] = (torch.cuda.synchronize, BLOCK)
    for nodes in GRAPH_SIZES:
        loops[f"cudaGraphLaunch_{nodes}"] = (_graph(nodes).replay, 1)
    return loops


def _triton_launcher(x: torch.Tensor) -> Callable[[], Any]:
    import triton
    import triton.language as tl

    @triton.jit
    def add_one(ptr):
        tl.store(ptr, tl.load(ptr) + 1.0)

    add_one[(1,)](x)  # compile outside the timing
    torch.cuda.synchronize()
    return lambda: add_one[(1,)](x)


def _graph(nodes: int) -> torch.cuda.CUDAGraph:
    x = torch.zeros(1, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            x.add_(1)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(nodes):
            x.add_(1)
    graph.replay()
    torch.cuda.synchronize()
    graph.keep_alive = x  # the captured tensor lives as long as the graph
    return graph


def _sync(on_cuda: bool) -> Callable[[], None]:
    return torch.cuda.synchronize if on_cuda else _empty


def measure_microloops(on_cuda: bool, repeats: int, calls: int) -> dict[str, dict[str, Any]]:
    """Per kind: bare and traced host ns per call, each repeat's median; bare and traced alternate."""
    loops = microloops(on_cuda)
    sync = _sync(on_cuda)
    samples: dict[str, dict[str, list[float]]] = {k: {"bare": [], "traced": []} for k in loops}
    for call, block in loops.values():  # warm every path once
        _per_call(call, block * 2, sync, block)
    for repeat in range(repeats):
        for mode in ("bare", "traced") if repeat % 2 == 0 else ("traced", "bare"):
            tracing = (
                torch.profiler.profile(**_profiler_kwargs(torch, on_cuda))
                if mode == "traced"
                else contextlib.nullcontext()
            )
            with tracing:
                for kind, (call, block) in loops.items():
                    n = calls if block > 1 else max(calls // 10, 10)
                    samples[kind][mode].append(_per_call(call, n, sync, block))
    out = {}
    for kind, modes in samples.items():
        bare, traced = statistics.median(modes["bare"]), statistics.median(modes["traced"])
        out[kind] = {
            "bare_us": bare / 1e3,
            "traced_us": traced / 1e3,
            "added_us": (traced - bare) / 1e3,
            "ratio": traced / bare if bare > 0 else None,
            "bare_us_repeats": [x / 1e3 for x in modes["bare"]],
            "traced_us_repeats": [x / 1e3 for x in modes["traced"]],
        }
    return out


def export_microloop_trace(on_cuda: bool, path: Path, calls: int) -> None:
    """One traced pass of every kind, `calls` calls each, exported: the runtime calls' own durations
    as the trace records them (what the analysis sees)."""
    loops = microloops(on_cuda)
    sync = _sync(on_cuda)
    from torch.profiler import record_function

    with torch.profiler.profile(**_profiler_kwargs(torch, on_cuda)) as prof:
        for kind, (call, block) in loops.items():
            with record_function(f"bench.{kind}"):
                _per_call(call, calls if block > 1 else max(calls // 10, 4), sync, block)
    _export_gz(prof, path)


def _export_gz(prof: Any, path: Path) -> None:
    import gzip
    import tempfile

    from bubblescope.files.atomic import write_bytes_atomic

    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(raw))
        write_bytes_atomic(path, gzip.compress(raw.read_bytes(), compresslevel=6, mtime=0))


def _step_ns_with_events(workload: Any, steps: int, on_cuda: bool, traced: bool) -> list[int]:
    """Per-step ns on the device timeline (events at step boundaries, as `timed.py`), bare or inside the
    profiler with a `record_function` per step (as `profiled.py`); host wall per step without CUDA."""
    from torch.profiler import record_function

    tracing = (
        torch.profiler.profile(**_profiler_kwargs(torch, on_cuda)) if traced else contextlib.nullcontext()
    )
    step_range = (lambda: record_function("bubblescope.step")) if traced else contextlib.nullcontext
    with tracing:
        if not on_cuda:
            out = []
            for _ in range(steps):
                start = time.perf_counter_ns()
                with step_range():
                    workload.step()
                out.append(time.perf_counter_ns() - start)
            return out
        events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
        torch.cuda.synchronize()
        for index in range(steps):
            events[index].record()
            with step_range():
                workload.step()
        events[steps].record()
        torch.cuda.synchronize()
    return [int(round(events[i].elapsed_time(events[i + 1]) * 1e6)) for i in range(steps)]


def decode_loop(name: str, preset: str, switches: str, args: argparse.Namespace, on_cuda: bool) -> dict:
    """Timed vs profiled steps of the reference workload; a `profile_window` trace, analysed."""
    from bubblescope.analysis.traces import analyze_traces
    from bubblescope.capture.measure import profiled_over_timed
    from bubblescope.capture.setup import build_workload, usable_switches

    workload = build_workload(None, preset, max_steps=8192).workload
    enabled = frozenset(usable_switches(workload.switches(), on_cuda)) if switches == "all" else frozenset()
    workload.prepare(enabled)
    for _ in range(args.warmup):
        workload.step()
    timed = run_timed(workload, steps=args.steps, warmup=args.warmup, repeats=3)
    bare, traced = [], []
    for repeat in range(args.repeats):
        for mode in ("bare", "traced") if repeat % 2 == 0 else ("traced", "bare"):
            reset_if_possible(workload)
            for _ in range(args.warmup):
                workload.step()
            (traced if mode == "traced" else bare).append(
                statistics.median(
                    _step_ns_with_events(workload, args.profile_steps, on_cuda, mode == "traced")
                )
            )
    trace_path = args.out / f"{name}.trace.json.gz"
    profile_window(workload, steps=4, warmup=4, trace_path=trace_path)
    timed_median = statistics.median(x for row in timed.samples_ns for x in row)
    try:
        analysis = analyze_traces([trace_path])
    except Exception as exc:  # noqa: BLE001 - the trace comes back and is analysed there
        print(f"{name}: trace not analysed here ({type(exc).__name__}: {exc})", flush=True)
        analysis = {"summary": {"gpu_step_ns_median": 0}, "devices": [], "error": str(exc)}
    result = {
        "workload": name,
        "preset": preset,
        "switches": sorted(enabled),
        "timed_step_us_median": timed_median / 1e3,
        "timed_samples_ns": timed.samples_ns,
        "tokens_per_step": timed.tokens_per_step,
        "bare_events_step_us": [x / 1e3 for x in bare],
        "traced_events_step_us": [x / 1e3 for x in traced],
        "traced_over_bare": statistics.median(traced) / statistics.median(bare),
        "profile_window_gpu_step_us_median": analysis["summary"]["gpu_step_ns_median"] / 1e3,
        "profiled_over_timed": profiled_over_timed(analysis, timed.samples_ns),
        "analysis_summary": analysis["summary"],
        "launches_per_step": _launches_per_step(analysis),
        "trace": trace_path.name,
    }
    print(
        f"{name}: timed {result['timed_step_us_median']:.1f} us/step; events bare "
        f"{statistics.median(bare) / 1e3:.1f} traced {statistics.median(traced) / 1e3:.1f} us/step "
        f"(x{result['traced_over_bare']:.3f}); profile_window GPU step "
        f"{result['profile_window_gpu_step_us_median']:.1f} us "
        f"(profiled/timed {result['profiled_over_timed']})",
        flush=True,
    )
    return result


def _launches_per_step(analysis: dict) -> dict[str, float]:
    """Kernels per step and graph launches in the window, for the per-call model's inputs."""
    summary = analysis["summary"]
    devices = analysis.get("devices") or []
    return {
        "kernels_per_step": summary.get("kernels_per_step"),
        "graph_launches_in_window": sum(d.get("graph_launches", 0) for d in devices),
    }


def print_table(rows: dict[str, dict[str, Any]]) -> None:
    print(f"{'call kind':<22}{'bare us':>10}{'traced us':>11}{'added us':>10}{'ratio':>8}")
    for kind, row in rows.items():
        ratio = f"{row['ratio']:.2f}" if row["ratio"] else "-"
        print(f"{kind:<22}{row['bare_us']:>10.2f}{row['traced_us']:>11.2f}{row['added_us']:>10.2f}{ratio:>8}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=1000, help="Calls per kind per repeat.")
    parser.add_argument("--steps", type=int, default=64, help="Timed decode steps per repeat.")
    parser.add_argument("--profile-steps", type=int, default=16, help="Event-timed steps per pass.")
    parser.add_argument("--warmup", type=int, default=8)
    parser.add_argument("--dry-run", action="store_true", help="CPU kinds, few calls, debug preset on CPU.")
    parser.add_argument("--no-decode", action="store_true", help="Microloops only (no decode loop).")
    args = parser.parse_args()
    on_cuda = torch.cuda.is_available() and not args.dry_run
    if args.dry_run:
        args.repeats, args.calls, args.steps, args.profile_steps, args.warmup = 2, 100, 4, 4, 1
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if on_cuda else "cpu (dry run)",
        "torch": torch.__version__,
        "command": " ".join(["python", *sys.argv]),
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    results["per_call"] = measure_microloops(on_cuda, args.repeats, args.calls)
    print_table(results["per_call"])
    # Written after each part: a device call cut short still brings back what was measured.
    write_json_atomic(args.out / "profiler_overhead.json", results)
    export_microloop_trace(on_cuda, args.out / "microloops.trace.json.gz", max(args.calls // 10, 20))
    results["decode"] = []
    configs = [] if args.no_decode else [("ling3-tiny-all", "all"), ("ling3-tiny-base", "none")]
    for name, switches in configs:
        if time.monotonic() - started > TIME_BUDGET_S:
            results["decode"].append({"workload": name, "error": "not measured: time budget spent"})
            continue
        try:
            results["decode"].append(
                decode_loop(name, "ling3-tiny" if on_cuda else "debug", switches, args, on_cuda)
            )
        except Exception as exc:  # noqa: BLE001 - keep the other numbers
            print(f"{name}: failed ({type(exc).__name__}: {exc})", flush=True)
            results["decode"].append({"workload": name, "error": f"{type(exc).__name__}: {exc}"})
        write_json_atomic(args.out / "profiler_overhead.json", results)
    results["elapsed_s"] = round(time.monotonic() - started, 1)
    write_json_atomic(args.out / "profiler_overhead.json", results)
    print(f"done in {results['elapsed_s']} s -> {args.out}", flush=True)


if __name__ == "__main__":
    main()
