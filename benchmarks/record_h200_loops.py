"""Issue 14 §3 and §7 on a real GPU: which implicit synchronizers block the host (the probes live in
implicit_sync_probes.py), and four small loops.

Subcommands (each writes under OUT_DIR; only torch is needed, the analysis runs elsewhere):

    implicit OUT_DIR   queue a ~20 ms kernel (torch.cuda._sleep), then time one call on the host:
                       torch.cuda.empty_cache() after a free (cudaFree), a new big allocation (cudaMalloc),
                       pin_memory (cudaHostAlloc), cudaHostRegister/Unregister, cudaMalloc/cudaFree/
                       cudaHostAlloc/cudaFreeHost/cudaMemset/cudaMemsetAsync through ctypes into the
                       libcudart torch loaded, torch.cuda.mem_get_info, one cudaStreamQuery and a
                       cudaStreamQuery polling loop, with controls (.cpu(), stream synchronize, a kernel
                       launch). A call "blocks" when, with the GPU busy, it returns only after the queued
                       kernel finished and took most of the kernel's time (its idle-GPU time is the
                       baseline). Writes implicit.json and implicit.json.gz (one profiled pass of each
                       probe, each in record_function("probe:<name>")).
    loops OUT_DIR      four small traces for tests/data/h200_loops/<name>/ (trace.json.gz + manifest.json):
                       run_ahead_slow_host, compile_tolist, empty_cache, two_stream_wait.

Runs on CPU with --tiny to check the flow (implicit then records nothing but says why).
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from implicit_sync_probes import implicit  # noqa: E402  (sibling scripts, not a package)
from validate_read_cost import (  # noqa: E402
    calibrate_spin,
    environment,
    export_gz,
    profiler_settings,
    spin,
    write_json,
)


def _line_of(fn, needle: str) -> str:
    """'file.py(N): function' of the first source line of `fn` holding `needle` (for the manifest)."""
    lines, first = inspect.getsourcelines(fn)
    for offset, text in enumerate(lines):
        if needle in text:
            return f"{Path(inspect.getsourcefile(fn)).name}({first + offset}): {fn.__name__}"
    return f"{Path(inspect.getsourcefile(fn)).name}({first}): {fn.__name__}"


def profile_loop(torch, out_dir: Path, step_fn, steps: int, warmup: int, manifest: dict, after=None) -> dict:
    """Warm up, profile `steps` steps (each in record_function("bubblescope.step")), save the trace.
    `after()`, when given, returns facts measured once the window closed, added to the manifest."""
    from torch.profiler import profile, record_function

    for index in range(warmup):
        step_fn(index)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    ends = []
    with profile(**profiler_settings(torch)) as prof:
        for index in range(steps):
            with record_function("bubblescope.step"):
                step_fn(warmup + index)
            ends.append(time.perf_counter_ns())
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    out_dir.mkdir(parents=True, exist_ok=True)
    size = export_gz(prof, out_dir / "trace.json.gz")
    manifest.update(
        steps=steps,
        warmup=warmup,
        trace_bytes=size,
        host_step_period_ns=(ends[-1] - ends[0]) / max(len(ends) - 1, 1),
        **environment(torch),
        **(after() if after else {}),
    )
    write_json(out_dir / "manifest.json", manifest)
    print(f"{out_dir.name}: {steps} steps, {size / 1e3:.0f} kB")
    return manifest


class GemvGraph:
    """A CUDA graph of `layers` GEMVs (eager on CPU) whose output is a 1-element argmax."""

    def __init__(self, torch, hidden: int, layers: int) -> None:
        from validate_read_cost import DecodeStep

        self.step = DecodeStep(torch, hidden, layers)

    def replay(self) -> None:
        self.step.replay()

    @property
    def out(self):
        return self.step.out


def loop_run_ahead_slow_host(torch, out: Path, tiny: bool) -> dict:
    """(1) The fix bubblescope recommends, with a host slower than the GPU: pinned non_blocking copy of
    the token, an event per step, the host waits for the PREVIOUS step's event, then does 3x the GPU
    step of host work. The device drains long before each wait, so the idle is the host's, not a read's."""
    cuda = torch.cuda.is_available()
    graph = GemvGraph(torch, 64 if tiny else 8192, 4 if tiny else 8)
    pinned = [torch.empty(graph.out.shape, dtype=graph.out.dtype, pin_memory=cuda) for _ in range(2)]
    events = [torch.cuda.Event() if cuda else None for _ in range(2)]
    ns_per_iter = calibrate_spin()
    gpu_ns = _gpu_ns(torch, graph.replay)
    host_iters = int(3 * gpu_ns / ns_per_iter)

    def step(index: int) -> None:
        graph.replay()
        slot = index % 2
        pinned[slot].copy_(graph.out, non_blocking=True)
        if cuda:
            events[slot].record()
        if index > 0:
            if cuda:
                events[1 - slot].synchronize()
            int(pinned[1 - slot].item())
        host_work(host_iters)

    manifest = {
        "loop": "run_ahead_slow_host",
        "gpu_step_ns": gpu_ns,
        "host_work_ns": host_iters * ns_per_iter,
        "wait_site": _line_of(step, "synchronize()"),
        "host_work_site": _line_of(host_work, "spin"),
    }
    return profile_loop(torch, out / "run_ahead_slow_host", step, steps=8, warmup=4, manifest=manifest)


def host_work(iterations: int) -> int:
    """The slow host's own work (a named frame, so a careful reader can see what the host did)."""
    return spin(iterations)


def _gpu_ns(torch, fn, replays: int = 10) -> float:
    """ns per call of `fn` run back to back (CUDA events; host wall time on CPU)."""
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(replays):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e6 / replays
    t0 = time.perf_counter_ns()
    for _ in range(replays):
        fn()
    return (time.perf_counter_ns() - t0) / replays


def tiny_decoder(torch, hidden: int, layers: int, vocab: int):
    """A decode-like block stack for torch.compile: `layers` x (GEMV + residual + RMS norm), a head GEMV,
    argmax. Weights are Parameters, so CUDA-graph trees keep them static (a plain tensor input would be
    copied into the graph's buffers every call); one shared block weight keeps the compile short, and
    each weight is larger than the H200's L2, so every GEMV streams from HBM."""
    cuda = torch.cuda.is_available()
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    gen = torch.Generator(device=device).manual_seed(1)

    class TinyDecoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(
                (torch.randn(hidden, hidden, device=device, generator=gen) / hidden**0.5).to(dtype),
                requires_grad=False,
            )
            self.head = torch.nn.Parameter(
                (torch.randn(vocab, hidden, device=device, generator=gen) / hidden**0.5).to(dtype),
                requires_grad=False,
            )
            self.layers = layers

        def forward(self, x):
            h = x
            for _ in range(self.layers):
                h = h + torch.nn.functional.linear(h, self.w)
                h = h * torch.rsqrt(h.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(h.dtype)
            return torch.nn.functional.linear(h, self.head).argmax(-1)

    model = TinyDecoder()
    x = torch.randn(1, hidden, device=device, generator=gen).to(dtype)
    return model, x


def loop_compile_tolist(torch, out: Path, tiny: bool) -> dict:
    """(2) torch.compile(mode="reduce-overhead") decode-like step (CUDA-graph trees on the GPU), then
    `.tolist()` of the token ids every step, as a sampling loop does."""
    cuda = torch.cuda.is_available()
    model, x = tiny_decoder(torch, 64 if tiny else 8192, 2 if tiny else 24, 256 if tiny else 32000)
    # On CPU the flow check uses the eager backend (dynamo only): no C++ compile on the dev box.
    compiled = (
        torch.compile(model, mode="reduce-overhead", fullgraph=True)
        if cuda
        else torch.compile(model, backend="eager", fullgraph=True)
    )
    tokens = []

    def step(index: int) -> None:
        ids = compiled(x)
        tokens.extend(ids.tolist())

    with torch.no_grad():
        t0 = time.perf_counter()
        for _ in range(3):
            compiled(x)
        compile_s = time.perf_counter() - t0
        gpu_ns = _gpu_ns(torch, lambda: compiled(x))
        manifest = {
            "loop": "compile_tolist",
            "compile_s": compile_s,
            "gpu_step_ns": gpu_ns,
            "read_site": _line_of(step, ".tolist()"),
            "layers": model.layers,
        }
        return profile_loop(torch, out / "compile_tolist", step, steps=8, warmup=5, manifest=manifest)


def loop_empty_cache(torch, out: Path, tiny: bool) -> dict:
    """(3) A step whose one large temporary (a matmul output) goes back to the driver every step:
    torch.cuda.empty_cache() frees it (cudaFree) and the next step allocates it again (cudaMalloc).

    empty_cache frees only whole unused segments. The 2026-12-01 recording made x and w through float32
    temporaries, which left a split cached segment holding w; y was carved from it and never freed (the
    trace has no cudaFree). So the inputs are made in their own dtype and the cache emptied before the
    loop, and the manifest counts the driver allocations and frees the window made."""
    cuda = torch.cuda.is_available()
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    rows, hidden = (16, 32) if tiny else (8192, 4096)
    gen = torch.Generator(device=device).manual_seed(2)
    x = torch.randn(rows, hidden, device=device, generator=gen, dtype=dtype)
    w = torch.randn(hidden, hidden, device=device, generator=gen, dtype=dtype)
    keep = torch.zeros(16, device=device)  # keeps the small pool's segment in use: one cudaFree per step
    sums = []

    def step(index: int) -> None:
        y = x @ w
        sums.append(y[0, :4].float().sum())
        del y
        torch.cuda.empty_cache()

    def driver_calls() -> dict:
        stats = torch.cuda.memory_stats() if cuda else {}
        return {k: stats.get(k) for k in ("num_device_alloc", "num_device_free")}

    gpu_ns = _gpu_ns(torch, lambda: x @ w)
    if cuda:
        torch.cuda.empty_cache()
    manifest = {
        "loop": "empty_cache",
        "gpu_matmul_ns": gpu_ns,
        "temp_bytes": rows * hidden * x.element_size(),
        "empty_cache_site": _line_of(step, "empty_cache()"),
        "keep_elements": keep.numel(),
        "driver_calls_before": driver_calls(),
    }
    return profile_loop(
        torch,
        out / "empty_cache",
        step,
        steps=8,
        warmup=3,
        manifest=manifest,
        after=lambda: {"driver_calls_after": driver_calls()},
    )


def loop_two_stream_wait(torch, out: Path, tiny: bool) -> dict:
    """(4) Per step: a small kernel A on the main stream; the side stream waits for it (wait_stream) and
    runs a long matmul B; the main stream waits for the side (wait_event) and runs a small kernel C
    that reads B's output. No host reads: the host runs ahead; device idle comes from the handoffs."""
    cuda = torch.cuda.is_available()
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    n = 32 if tiny else 4096
    gen = torch.Generator(device=device).manual_seed(3)
    p = torch.randn(n, n, device=device, generator=gen).to(dtype)
    a_buf = torch.zeros(n, device=device, dtype=dtype)
    b_buf = torch.empty(n, n, device=device, dtype=dtype)
    c_buf = torch.zeros(n, device=device, dtype=dtype)
    main = torch.cuda.current_stream() if cuda else None
    side = torch.cuda.Stream() if cuda else None
    done = torch.cuda.Event() if cuda else None

    def step(index: int) -> None:
        torch.add(a_buf, 1.0, out=a_buf)
        if cuda:
            side.wait_stream(main)
            with torch.cuda.stream(side):
                torch.matmul(p, p, out=b_buf)
                done.record(side)
            main.wait_event(done)
        else:
            torch.matmul(p, p, out=b_buf)
        torch.add(b_buf[0], a_buf, out=c_buf)

    gpu_ns = _gpu_ns(torch, lambda: torch.matmul(p, p, out=b_buf))
    manifest = {
        "loop": "two_stream_wait",
        "side_matmul_ns": gpu_ns,
        "n": n,
        "side_stream": side.cuda_stream if cuda else None,
        "main_stream": main.cuda_stream if cuda else None,
    }
    return profile_loop(torch, out / "two_stream_wait", step, steps=12, warmup=3, manifest=manifest)


LOOPS = {
    "run_ahead_slow_host": loop_run_ahead_slow_host,
    "empty_cache": loop_empty_cache,
    "two_stream_wait": loop_two_stream_wait,
    "compile_tolist": loop_compile_tolist,
}


def loops(out: Path, names: list[str], tiny: bool) -> None:
    import torch

    failed = []
    for name in names:
        try:
            LOOPS[name](torch, out, tiny)
        except Exception:  # record the others even if one loop fails on this machine
            traceback.print_exc()
            failed.append(name)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
    if failed:
        raise SystemExit(f"loops failed: {', '.join(failed)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_impl = sub.add_parser("implicit", help="which implicit synchronizers block the host")
    p_impl.add_argument("out_dir", type=Path)
    p_impl.add_argument("--repeats", type=int, default=3)
    p_loops = sub.add_parser("loops", help="record the four small loop traces")
    p_loops.add_argument("out_dir", type=Path)
    p_loops.add_argument("--only", default=",".join(LOOPS), help=f"comma-separated subset of {list(LOOPS)}")
    p_loops.add_argument("--tiny", action="store_true", help="CPU flow check sizes")
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    if args.command == "implicit":
        if args.repeats < 1:
            print("error: --repeats must be >= 1", file=sys.stderr)
            return 2
        implicit(args.out_dir, args.repeats)
    else:
        names = [n for n in args.only.split(",") if n]
        unknown = sorted(set(names) - set(LOOPS))
        if unknown:
            print(f"error: unknown loop(s) {unknown}; choose from {list(LOOPS)}", file=sys.stderr)
            return 2
        loops(args.out_dir, names, args.tiny)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
