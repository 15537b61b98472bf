"""Runtime and driver call names, one table per vendor (CUDA, HIP), and the questions asked of them.

Every detector asks "is this call a synchronize / a synchronous copy / a poll / a graph launch / a
kernel launch / a stream-waits-on-event / an implicit synchronizer?" here, never with its own list, so
a ROCm trace (`hipMemcpyWithStream`, `hipStreamSynchronize`, `hipGraphLaunch`, ...) shows the same
reads, replays and launches as the same workload traced on CUDA.

Implicit synchronizers are calls that are not named "synchronize" yet wait for the device:
  free        `cudaFree` / `hipFree` synchronize the device before releasing memory: in PyTorch
              the caching allocator releasing blocks (`torch.cuda.empty_cache()`, fragmentation)
  host_alloc  `cudaHostAlloc` / `cudaMallocHost` / `cudaHostUnregister` (and HIP's): pinned
              host allocation and unregistration. Measured on the H200 (benchmarks/RESULTS.md,
              "Implicit synchronizers on the H200", 2026-12-01): `cudaHostUnregister` waits for a
              queued 20 ms kernel (1.2 ms idle, 21.2 ms busy); `cudaHostAlloc` takes 22-27 ms by itself,
              longer than the kernel, so whether it waits is undetermined: kept as a read, unproven.
              `cudaHostRegister` is NOT one: it returned in 2.7 ms with or without the 20 ms kernel
              queued (2719 vs 2670 us, kernel still running at return 3/3), so it and its driver form
              `cuMemHostRegister` are left out. HIP's forms are not measured (no ROCm device here).
  malloc      `cudaMalloc` / `hipMalloc`: a read only when the trace shows it waited (a sync row)
  memset      a synchronous `cudaMemset` / `hipMemset` on pageable memory
Polls (`cudaStreamQuery`, `cudaEventQuery`, ...) return at once whatever the device state: a spin loop
of them is the host waiting by polling, never a blocking read.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RuntimeNames:
    """The call names of one vendor's runtime and driver APIs.

    Attributes:
        vendor: "cuda" | "hip".
        synchronize: explicit host-blocking synchronize calls.
        copy_prefixes: prefixes of copy calls; one without "Async" in its name is synchronous.
        polls: calls that return at once (query, capture status).
        graph_launches: calls that replay a captured graph (one correlation id for all its kernels).
        kernel_launches: kernel launch calls (besides any name containing "LaunchKernel").
        stream_waits: calls that make a stream wait on an event (block a stream, not the host).
        implicit: implicit synchronizer name -> read kind (see the module docstring).
        memsets: synchronous memset calls (a read on pageable memory only).
    """

    vendor: str
    synchronize: frozenset[str]
    copy_prefixes: tuple[str, ...]
    polls: frozenset[str]
    graph_launches: frozenset[str]
    kernel_launches: frozenset[str]
    stream_waits: frozenset[str]
    implicit: dict[str, str]
    memsets: frozenset[str]


CUDA = RuntimeNames(
    vendor="cuda",
    synchronize=frozenset(
        {
            "cudaStreamSynchronize",
            "cudaStreamSynchronize_ptsz",
            "cudaDeviceSynchronize",
            "cudaEventSynchronize",
            "cudaThreadSynchronize",
            "cuStreamSynchronize",
            "cuStreamSynchronize_ptsz",
            "cuCtxSynchronize",
            "cuEventSynchronize",
        }
    ),
    copy_prefixes=("cudaMemcpy", "cuMemcpy"),
    polls=frozenset(
        {
            "cudaEventQuery",
            "cuEventQuery",
            "cudaStreamQuery",
            "cudaStreamQuery_ptsz",
            "cuStreamQuery",
            "cuStreamQuery_ptsz",
            "cudaStreamGetCaptureInfo",
            "cudaStreamGetCaptureInfo_v2",
            "cudaStreamIsCapturing",
        }
    ),
    graph_launches=frozenset(
        {
            "cudaGraphLaunch",
            "cudaGraphLaunch_v10000",
            "cudaGraphLaunch_ptsz",
            "cuGraphLaunch",
            "cuGraphLaunch_ptsz",
        }
    ),
    kernel_launches=frozenset(
        {"cudaLaunchCooperativeKernel", "cudaLaunchCooperativeKernelMultiDevice", "cuLaunchCooperativeKernel"}
    ),
    stream_waits=frozenset({"cudaStreamWaitEvent", "cudaStreamWaitEvent_ptsz", "cuStreamWaitEvent"}),
    implicit={
        "cudaFree": "free",
        "cudaFreeHost": "free",
        "cudaFreeArray": "free",
        "cuMemFree": "free",
        "cuMemFree_v2": "free",
        "cuMemFreeHost": "free",
        "cudaHostAlloc": "host_alloc",
        "cudaMallocHost": "host_alloc",
        # cudaHostRegister / cuMemHostRegister: not listed, measured not to wait (module docstring).
        "cudaHostUnregister": "host_alloc",
        "cuMemHostAlloc": "host_alloc",
        "cuMemAllocHost": "host_alloc",
        "cuMemAllocHost_v2": "host_alloc",
        "cuMemHostUnregister": "host_alloc",
        "cudaMalloc": "malloc",
        "cuMemAlloc": "malloc",
        "cuMemAlloc_v2": "malloc",
    },
    memsets=frozenset({"cudaMemset", "cudaMemset2D", "cudaMemset3D", "cuMemsetD8", "cuMemsetD32"}),
)

HIP = RuntimeNames(
    vendor="hip",
    synchronize=frozenset(
        {"hipStreamSynchronize", "hipDeviceSynchronize", "hipEventSynchronize", "hipCtxSynchronize"}
    ),
    # hipMemcpy, hipMemcpyDtoH, hipMemcpyWithStream (synchronous although it takes a stream), ...
    copy_prefixes=("hipMemcpy",),
    polls=frozenset(
        {
            "hipEventQuery",
            "hipStreamQuery",
            "hipStreamGetCaptureInfo",
            "hipStreamGetCaptureInfo_v2",
            "hipStreamIsCapturing",
        }
    ),
    graph_launches=frozenset({"hipGraphLaunch"}),
    kernel_launches=frozenset(
        {
            "hipLaunchKernel",
            "hipExtLaunchKernel",
            "hipModuleLaunchKernel",
            "hipExtModuleLaunchKernel",
            "hipHccModuleLaunchKernel",
            "hipLaunchCooperativeKernel",
            "hipLaunchByPtr",
        }
    ),
    stream_waits=frozenset({"hipStreamWaitEvent"}),
    implicit={
        "hipFree": "free",
        "hipHostFree": "free",
        "hipFreeHost": "free",
        "hipFreeArray": "free",
        "hipHostMalloc": "host_alloc",
        "hipMallocHost": "host_alloc",
        "hipHostAlloc": "host_alloc",
        "hipHostRegister": "host_alloc",
        "hipHostUnregister": "host_alloc",
        "hipMalloc": "malloc",
        "hipExtMallocWithFlags": "malloc",
    },
    memsets=frozenset({"hipMemset", "hipMemsetD8", "hipMemsetD32", "hipMemset2D", "hipMemset3D"}),
)

VENDORS: tuple[RuntimeNames, ...] = (CUDA, HIP)

# Synchronizes that wait for all of a device's work: when one returns, every op launched before it has
# ended. A trace where such an op ends later shows the GPU clock running behind the host clock.
DEVICE_SYNCHRONIZE = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaThreadSynchronize",
        "cuCtxSynchronize",
        "hipDeviceSynchronize",
        "hipCtxSynchronize",
    }
)

# Stream capture: kernels launched between these run only when the captured graph is replayed.
CAPTURE_BEGINS = frozenset(
    {
        "cudaStreamBeginCapture",
        "cudaStreamBeginCapture_ptsz",
        "cuStreamBeginCapture",
        "cuStreamBeginCapture_v2",
    }
    | {"hipStreamBeginCapture"}
)
CAPTURE_ENDS = frozenset(
    {"cudaStreamEndCapture", "cudaStreamEndCapture_ptsz", "cuStreamEndCapture"} | {"hipStreamEndCapture"}
)

SYNCHRONIZE = frozenset().union(*(v.synchronize for v in VENDORS))
POLLS = frozenset().union(*(v.polls for v in VENDORS))
GRAPH_LAUNCHES = frozenset().union(*(v.graph_launches for v in VENDORS))
STREAM_WAITS = frozenset().union(*(v.stream_waits for v in VENDORS))
MEMSETS = frozenset().union(*(v.memsets for v in VENDORS))
_KERNEL_LAUNCHES = frozenset().union(*(v.kernel_launches for v in VENDORS))
_COPY_PREFIXES = tuple(p for v in VENDORS for p in v.copy_prefixes)
IMPLICIT_KIND: dict[str, str] = {name: kind for v in VENDORS for name, kind in v.implicit.items()}


def is_synchronize(name: str) -> bool:
    """An explicit host-blocking synchronize (stream, device, event, context)."""
    return name in SYNCHRONIZE


def is_sync_copy(name: str) -> bool:
    """A synchronous copy: a memcpy call without "Async" in its name (`hipMemcpyWithStream` too)."""
    return name.startswith(_COPY_PREFIXES) and "Async" not in name


def is_copy(name: str) -> bool:
    """Any memcpy call, synchronous or not."""
    return name.startswith(_COPY_PREFIXES)


def is_poll(name: str) -> bool:
    """A call that returns at once whatever the device state (never a blocking read)."""
    return name in POLLS


def is_graph_launch(name: str) -> bool:
    """A graph replay launch (`cudaGraphLaunch`, `hipGraphLaunch`, driver forms)."""
    return name in GRAPH_LAUNCHES


def is_kernel_launch(name: str) -> bool:
    """A kernel launch (`cudaLaunchKernel`, `cudaLaunchKernelExC`, `cuLaunchKernel`, `hip*LaunchKernel`)."""
    return "LaunchKernel" in name or name in _KERNEL_LAUNCHES


def is_stream_wait(name: str) -> bool:
    """A call that makes a stream wait on an event (`cudaStreamWaitEvent`, `hipStreamWaitEvent`)."""
    return name in STREAM_WAITS


def implicit_sync_kind(name: str) -> str | None:
    """The read kind ("free", "host_alloc", "malloc") of an implicit synchronizer, else None."""
    return IMPLICIT_KIND.get(name)


def is_sync_memset(name: str) -> bool:
    """A synchronous memset call (a read when its target is pageable host memory)."""
    return name in MEMSETS


def vendor_of(name: str) -> str:
    """The vendor of a call: "hip" for HIP, "cuda" otherwise (driver `cu*` calls are CUDA)."""
    return "hip" if name.startswith("hip") else "cuda"
