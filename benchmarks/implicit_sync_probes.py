"""Issue 14 §3 on a real GPU: which implicit synchronizers block the host (`record_h200_loops.py implicit`).

Queue a ~20 ms kernel (torch.cuda._sleep), then time one call on the host; a call "blocks" when, with the
GPU busy, it returns only after the queued kernel finished and took most of the kernel's time (its
idle-GPU time is the baseline). See record_h200_loops.py's docstring for the probes and outputs.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import statistics
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from validate_read_cost import (  # noqa: E402  (sibling script, not a package)
    environment,
    export_gz,
    profiler_settings,
    write_json,
)

KERNEL_MS = 20.0
MIB = 1 << 20


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
