"""Issue 14 §3 and §7 on a real GPU: which implicit synchronizers block the host, and four small loops.

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
import ctypes
import ctypes.util
import glob
import inspect
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from validate_read_cost import (  # noqa: E402  (sibling script, not a package)
    calibrate_spin,
    environment,
    export_gz,
    profiler_settings,
    spin,
    write_json,
)

KERNEL_MS = 20.0
MIB = 1 << 20


# ---------------------------------------------------------------------------------------------------
# libcudart through ctypes


def find_cudart() -> ctypes.CDLL:
    """The libcudart torch already loaded (same library, so CUPTI traces our calls too)."""
    candidates = []
    try:
        with open("/proc/self/maps") as maps:
            candidates += sorted({line.split()[-1] for line in maps if "libcudart.so" in line})
    except OSError:
        pass
    import torch

    torch_dir = Path(torch.__file__).resolve().parent
    candidates += sorted(glob.glob(str(torch_dir / "lib" / "libcudart.so*")))
    candidates += sorted(glob.glob(str(torch_dir.parent / "nvidia" / "**" / "libcudart.so*"), recursive=True))
    found = ctypes.util.find_library("cudart")
    if found:
        candidates.append(found)
    for path in candidates:
        try:
            lib = ctypes.CDLL(path)
            lib.cudaFree  # noqa: B018  (raises AttributeError when this is not the runtime)
            return lib
        except (OSError, AttributeError):
            continue
    raise RuntimeError(f"no libcudart found (tried {candidates})")


class Cudart:
    """The few runtime calls torch has no Python call for. Each returns the cudaError_t code."""

    def __init__(self) -> None:
        lib = find_cudart()
        self.path = getattr(lib, "_name", "?")
        vp, sz, ui = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint
        signatures = {
            "cudaMalloc": [ctypes.POINTER(vp), sz],
            "cudaFree": [vp],
            "cudaHostAlloc": [ctypes.POINTER(vp), sz, ui],
            "cudaFreeHost": [vp],
            "cudaHostRegister": [vp, sz, ui],
            "cudaHostUnregister": [vp],
            "cudaMemset": [vp, ctypes.c_int, sz],
            "cudaMemsetAsync": [vp, ctypes.c_int, sz, vp],
            "cudaGetLastError": [],
        }
        for name, argtypes in signatures.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = argtypes, ctypes.c_int
            setattr(self, name, fn)

    def malloc(self, nbytes: int) -> ctypes.c_void_p:
        ptr = ctypes.c_void_p()
        self.check(self.cudaMalloc(ctypes.byref(ptr), nbytes), "cudaMalloc")
        return ptr

    def host_alloc(self, nbytes: int) -> ctypes.c_void_p:
        ptr = ctypes.c_void_p()
        self.check(self.cudaHostAlloc(ctypes.byref(ptr), nbytes, 0), "cudaHostAlloc")
        return ptr

    @staticmethod
    def check(code: int, what: str) -> None:
        if code != 0:
            raise RuntimeError(f"{what} returned cudaError {code}")


# ---------------------------------------------------------------------------------------------------
# implicit synchronizers


class Probe:
    """One call to time: setup() before the kernel is queued, call() timed, cleanup() after."""

    def __init__(self, name: str, api: str, call, setup=None, cleanup=None, note: str = "") -> None:
        self.name, self.api, self.note = name, api, note
        self._call, self._setup, self._cleanup = call, setup, cleanup
        self.state: dict = {}

    def setup(self) -> None:
        self.state = {}
        if self._setup:
            self._setup(self.state)

    def call(self):
        return self._call(self.state)

    def cleanup(self) -> None:
        if self._cleanup:
            self._cleanup(self.state)


def make_probes(torch, rt: Cudart) -> list[Probe]:
    big = 256 * MIB
    host = 64 * MIB
    stream = torch.cuda.current_stream()

    def torch_free_cached(s):
        s["x"] = torch.empty(big, dtype=torch.uint8, device="cuda")
        del s["x"]  # the block stays in the caching allocator until empty_cache

    def empty_alloc_cache(s):
        torch.cuda.empty_cache()

    def torch_alloc(s):
        s["x"] = torch.empty(big, dtype=torch.uint8, device="cuda")

    def drop_and_empty(s):
        s.clear()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()

    def host_cache_empty(s):
        empty = getattr(torch._C, "_host_emptyCache", None)
        if empty is not None:
            empty()

    def pin(s):
        s["p"] = torch.empty(host, dtype=torch.uint8, pin_memory=True)

    def rt_malloc(s):
        s["ptr"] = rt.malloc(big)

    def rt_free_after(s):
        if "ptr" in s:
            torch.cuda.synchronize()
            rt.check(rt.cudaFree(s.pop("ptr")), "cudaFree")

    def rt_free(s):
        return rt.cudaFree(s.pop("ptr"))

    def rt_host_alloc(s):
        s["hptr"] = rt.host_alloc(host)

    def rt_free_host_after(s):
        if "hptr" in s:
            torch.cuda.synchronize()
            rt.check(rt.cudaFreeHost(s.pop("hptr")), "cudaFreeHost")

    def rt_free_host(s):
        return rt.cudaFreeHost(s.pop("hptr"))

    def pageable_buffer(s):
        s["buf"] = ctypes.create_string_buffer(host)  # zero-filled: every page touched
        s["addr"] = ctypes.addressof(s["buf"])

    def register(s):
        return rt.cudaHostRegister(s["addr"], host, 0)

    def unregister_after(s):
        torch.cuda.synchronize()
        if s.pop("registered", True):
            rt.cudaHostUnregister(s["addr"])

    def registered_buffer(s):
        pageable_buffer(s)
        rt.check(rt.cudaHostRegister(s["addr"], host, 0), "cudaHostRegister")

    def unregister(s):
        s["registered"] = False
        return rt.cudaHostUnregister(s["addr"])

    def device_buffer(s):
        s["x"] = torch.empty(host, dtype=torch.uint8, device="cuda")

    def pinned_buffer(s):
        s["p"] = torch.empty(host, dtype=torch.uint8, pin_memory=True)

    def memset_device(s):
        return rt.cudaMemset(s["x"].data_ptr(), 0, host)

    def memset_async_device(s):
        return rt.cudaMemsetAsync(s["x"].data_ptr(), 0, host, stream.cuda_stream)

    def memset_pinned(s):
        return rt.cudaMemset(s["p"].data_ptr(), 0, host)

    def memset_pageable(s):
        return rt.cudaMemset(s["addr"], 0, host)

    def small_device(s):
        s["x"] = torch.ones(1024, device="cuda")

    def to_cpu(s):
        return s["x"].cpu()

    def poll(s):
        polls = 1
        while not stream.query():
            polls += 1
        return polls

    def sync_after(s):
        s.clear()
        torch.cuda.synchronize()

    return [
        Probe(
            "kernel_launch",
            "cudaLaunchKernel",
            lambda s: s["x"].add_(1),
            small_device,
            sync_after,
            "control: an asynchronous launch",
        ),
        Probe(
            "stream_synchronize",
            "cudaStreamSynchronize",
            lambda s: stream.synchronize(),
            note="control: an explicit synchronize",
        ),
        Probe(
            "to_cpu_pageable",
            "cudaMemcpyAsync",
            to_cpu,
            small_device,
            sync_after,
            "control: .cpu() into pageable memory",
        ),
        Probe(
            "empty_cache",
            "cudaFree",
            empty_alloc_cache,
            torch_free_cached,
            drop_and_empty,
            "torch.cuda.empty_cache() releasing one cached 256 MiB block",
        ),
        Probe(
            "torch_new_allocation",
            "cudaMalloc",
            lambda s: torch_alloc(s),
            empty_alloc_cache,
            drop_and_empty,
            "torch.empty(256 MiB) with the caching allocator empty",
        ),
        Probe("cudaMalloc", "cudaMalloc", rt_malloc, None, rt_free_after, "ctypes, 256 MiB"),
        Probe("cudaFree", "cudaFree", rt_free, rt_malloc, rt_free_after, "ctypes, 256 MiB"),
        Probe(
            "pin_memory",
            "cudaHostAlloc",
            pin,
            host_cache_empty,
            sync_after,
            "torch.empty(64 MiB, pin_memory=True), host cache emptied first",
        ),
        Probe("cudaHostAlloc", "cudaHostAlloc", rt_host_alloc, None, rt_free_host_after, "ctypes, 64 MiB"),
        Probe(
            "cudaFreeHost", "cudaFreeHost", rt_free_host, rt_host_alloc, rt_free_host_after, "ctypes, 64 MiB"
        ),
        Probe(
            "cudaHostRegister",
            "cudaHostRegister",
            register,
            pageable_buffer,
            unregister_after,
            "ctypes, 64 MiB of touched pageable memory",
        ),
        Probe(
            "cudaHostUnregister",
            "cudaHostUnregister",
            unregister,
            registered_buffer,
            unregister_after,
            "ctypes, 64 MiB",
        ),
        Probe(
            "cudaMemset_device",
            "cudaMemset",
            memset_device,
            device_buffer,
            sync_after,
            "ctypes, 64 MiB of device memory, legacy default stream",
        ),
        Probe(
            "cudaMemsetAsync_device",
            "cudaMemsetAsync",
            memset_async_device,
            device_buffer,
            sync_after,
            "ctypes, 64 MiB of device memory, torch's current stream",
        ),
        Probe(
            "cudaMemset_pinned",
            "cudaMemset",
            memset_pinned,
            pinned_buffer,
            sync_after,
            "ctypes, 64 MiB of pinned host memory",
        ),
        Probe(
            "cudaMemset_pageable",
            "cudaMemset",
            memset_pageable,
            pageable_buffer,
            sync_after,
            "ctypes, 64 MiB of pageable host memory (an error code if the device cannot reach it)",
        ),
        Probe(
            "mem_get_info",
            "cudaMemGetInfo",
            lambda s: torch.cuda.mem_get_info(),
            note="torch.cuda.mem_get_info",
        ),
        Probe("cudaStreamQuery", "cudaStreamQuery", lambda s: stream.query(), note="one query: a poll"),
        Probe(
            "cudaStreamQuery_poll",
            "cudaStreamQuery",
            poll,
            note="while not stream.query(): a polling wait made of non-blocking calls",
        ),
        Probe(
            "cudaEventQuery",
            "cudaEventQuery",
            lambda s: s["e"].query(),
            lambda s: s.update(e=torch.cuda.Event()) or s["e"].record(),
            sync_after,
            "one event query",
        ),
    ]


def _verdict(done_every_time: bool, idle_ns: float, busy_ns: float, kernel_ns: float) -> str:
    """'blocks', 'returns' or 'inconclusive' (the call alone lasts at least half the kernel)."""
    if idle_ns > 0.5 * kernel_ns:
        return "inconclusive"
    return "blocks" if done_every_time and busy_ns - idle_ns > 0.5 * kernel_ns else "returns"


def sleep_cycles_for(torch, ms: float) -> int:
    """Cycles of torch.cuda._sleep that take about `ms` on this GPU now (clocks warmed first)."""
    probe_cycles = 20_000_000
    for _ in range(3):
        torch.cuda._sleep(probe_cycles)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(probe_cycles)
    end.record()
    end.synchronize()
    return int(probe_cycles * ms / start.elapsed_time(end))


def time_probe(torch, rt: Cudart, probe: Probe, cycles: int | None) -> dict:
    """One timed call; with `cycles`, a sleep kernel is queued first and its completion checked."""
    probe.setup()
    torch.cuda.synchronize()
    done = torch.cuda.Event(enable_timing=True)
    queued = torch.cuda.Event(enable_timing=True)
    if cycles:
        queued.record()
        torch.cuda._sleep(cycles)
    done.record()
    t0 = time.perf_counter_ns()
    result = probe.call()
    t1 = time.perf_counter_ns()
    # A ctypes call that failed (cudaMemset on pageable memory) leaves the runtime's last error set,
    # and torch's next launch check would raise it: read it off here (the code is in `result`).
    rt.cudaGetLastError()
    finished_at_return = done.query()
    done.synchronize()
    t2 = time.perf_counter_ns()
    kernel_ms = queued.elapsed_time(done) if cycles else 0.0
    probe.cleanup()
    code = result if isinstance(result, int) and not isinstance(result, bool) else None
    return {
        "call_ns": t1 - t0,
        "kernel_done_at_return": bool(finished_at_return),
        "kernel_left_after_return_ns": t2 - t1,
        "kernel_ns": kernel_ms * 1e6,
        "result": code,
    }


def implicit(out: Path, repeats: int) -> dict:
    import torch

    env = environment(torch)
    if not torch.cuda.is_available():
        data = {
            "schema": "bubblescope.implicit_syncs/1",
            **env,
            "probes": [],
            "note": "no CUDA device: nothing measured (the probes need a GPU)",
        }
        write_json(out / "implicit.json", data)
        print(data["note"])
        return data
    torch.ones(1, device="cuda").sum().item()  # context, cuBLAS-free warm-up
    rt = Cudart()
    cycles = sleep_cycles_for(torch, KERNEL_MS)
    probes = make_probes(torch, rt)
    rows = []
    for probe in probes:
        row = {"name": probe.name, "api": probe.api, "note": probe.note, "idle": [], "busy": []}
        try:
            time_probe(torch, rt, probe, None)  # first call pays any lazy init
            for _ in range(repeats):
                row["idle"].append(time_probe(torch, rt, probe, None))
                row["busy"].append(time_probe(torch, rt, probe, cycles))
        except Exception as exc:  # record why and go on: one broken probe must not lose the others
            row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            traceback.print_exc()
            torch.cuda.synchronize()
        if row["busy"]:
            idle_ns = statistics.median(r["call_ns"] for r in row["idle"])
            busy_ns = statistics.median(r["call_ns"] for r in row["busy"])
            kernel_ns = statistics.median(r["kernel_ns"] for r in row["busy"])
            done = sum(r["kernel_done_at_return"] for r in row["busy"])
            row.update(
                idle_call_ns=idle_ns,
                busy_call_ns=busy_ns,
                kernel_ns=kernel_ns,
                done_at_return=f"{done}/{len(row['busy'])}",
                result_codes=sorted({r["result"] for r in row["busy"] if r["result"] is not None}),
                blocks=bool(done == len(row["busy"]) and busy_ns - idle_ns > 0.5 * kernel_ns),
                # A call that alone takes about as long as the kernel (cudaHostAlloc of 64 MiB: ~25 ms)
                # returns after the kernel whether it waited or not: no verdict.
                verdict=_verdict(done == len(row["busy"]), idle_ns, busy_ns, kernel_ns),
            )
            print(
                f"{probe.name:24s} {probe.api:20s} idle {idle_ns / 1e3:9.1f} us  "
                f"busy {busy_ns / 1e3:9.1f} us "
                f"(kernel {kernel_ns / 1e6:.1f} ms, done at return {row['done_at_return']}) -> "
                f"{row['verdict']}"
            )
        rows.append(row)
    from torch.profiler import profile, record_function

    with profile(**profiler_settings(torch)) as prof:
        for probe in probes:
            try:
                probe.setup()
                torch.cuda.synchronize()
                with record_function(f"probe:{probe.name}"):
                    # A quarter of the timed kernel: the polling probe records one event per poll.
                    torch.cuda._sleep(cycles // 4)
                    probe.call()
                rt.cudaGetLastError()
                torch.cuda.synchronize()
                probe.cleanup()
            except Exception:
                traceback.print_exc()
                torch.cuda.synchronize()
    export_gz(prof, out / "implicit.json.gz")
    data = {
        "schema": "bubblescope.implicit_syncs/1",
        **env,
        "cudart": rt.path,
        "sleep_cycles": cycles,
        "kernel_ms_target": KERNEL_MS,
        "repeats": repeats,
        "trace": "implicit.json.gz",
        "probes": rows,
    }
    write_json(out / "implicit.json", data)
    return data


# ---------------------------------------------------------------------------------------------------
# the four loops of §7


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
