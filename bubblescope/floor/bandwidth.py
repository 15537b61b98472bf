"""HBM bandwidth for the speed-of-light floor: measured on CUDA, given by the user, or an assumed default.

The floor is bytes read per token / bandwidth. The reference bandwidth is a large device-to-device
copy (bytes read + bytes written, median of repeats, timed with CUDA events): the rate a kernel that
streams weights can hope to reach. On the H200 used for this project that copy ceiling measured
4140 GB/s (`shared/notes/h200_facts.md`), the default when there is no GPU to measure.
torch is imported lazily so that `import bubblescope.floor.bandwidth` stays torch-free.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass

from bubblescope.errors import BubblescopeError, ConfigError

ASSUMED_BANDWIDTH_GBPS = 4140.0
ASSUMED_SOURCE = "assumed (H200 copy ceiling)"
MEASURED_SOURCE = "measured"
GIVEN_SOURCE = "given"


@dataclass(frozen=True)
class Bandwidth:
    """A bandwidth and where it came from ("measured", "given" or "assumed (H200 copy ceiling)")."""

    gbps: float
    source: str


@dataclass(frozen=True)
class MachineMemory:
    """Memory a model could live in: CUDA devices when present, else host RAM.

    Attributes:
        kind: "cuda" or "cpu".
        devices: number of CUDA devices (1 for the host).
        bytes_per_device: total memory of one device (host RAM for "cpu"); 0 when unknown.
        name: device name for display.
    """

    kind: str
    devices: int
    bytes_per_device: int
    name: str


def measure_copy_bandwidth_gbps(*, size_bytes: int = 1 << 30, repeats: int = 20, warmup: int = 3) -> float:
    """Device-to-device copy bandwidth of the current CUDA device in GB/s (10^9 bytes/s).

    Args:
        size_bytes: bytes of the copied buffer (default 1 GiB, far beyond L2 so HBM is measured).
        repeats: timed copies; the median is returned.
        warmup: untimed copies first.

    Returns:
        (bytes read + bytes written) / median copy time.

    Raises:
        BubblescopeError: no CUDA device.
    """
    import torch

    if not torch.cuda.is_available():
        raise BubblescopeError("cannot measure bandwidth: no CUDA device (pass --bandwidth GBPS)")
    if size_bytes <= 0 or repeats <= 0:
        raise ConfigError("size_bytes and repeats must be positive")
    elements = size_bytes // 2
    # [elements] bf16 each; two buffers so every copy reads one and writes the other.
    source = torch.empty(elements, dtype=torch.bfloat16, device="cuda").fill_(1.0)
    target = torch.empty_like(source)
    for _ in range(warmup):
        target.copy_(source)
    torch.cuda.synchronize()
    durations_ms = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        target.copy_(source)
        end.record()
        end.synchronize()
        durations_ms.append(start.elapsed_time(end))
    median_s = statistics.median(durations_ms) / 1e3
    moved_bytes = 2 * elements * source.element_size()
    del source, target
    torch.cuda.empty_cache()
    return moved_bytes / median_s / 1e9


def resolve_bandwidth(given_gbps: float | None = None, *, measure: bool = True) -> Bandwidth:
    """The bandwidth to use for the floor: given > measured on CUDA > assumed H200 copy ceiling.

    Args:
        given_gbps: a user-supplied GB/s (must be > 0).
        measure: measure on CUDA when available (False skips torch entirely).
    """
    if given_gbps is not None:
        if not given_gbps > 0:
            raise ConfigError(f"--bandwidth must be > 0 GB/s, got {given_gbps}")
        return Bandwidth(float(given_gbps), GIVEN_SOURCE)
    if measure and _cuda_available():
        return Bandwidth(measure_copy_bandwidth_gbps(), MEASURED_SOURCE)
    return Bandwidth(ASSUMED_BANDWIDTH_GBPS, ASSUMED_SOURCE)


def machine_memory() -> MachineMemory:
    """What this machine offers to hold weights: its CUDA devices, or host RAM without one."""
    if _cuda_available():
        import torch

        props = torch.cuda.get_device_properties(0)
        return MachineMemory("cuda", torch.cuda.device_count(), int(props.total_memory), props.name)
    try:
        host_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        host_bytes = 0
    return MachineMemory("cpu", 1, int(host_bytes), "host RAM")


# Files a CUDA (NVIDIA), ROCm or WSL GPU driver creates; without any of them torch would find no device.
_GPU_DRIVER_FILES = ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/kfd", "/dev/dxg")


def gpu_driver_present() -> bool:
    """True when this machine may have a GPU torch can use: a GPU driver is loaded and
    CUDA_VISIBLE_DEVICES does not hide every device. Cheap: `floor` and `presets` ask this before
    importing torch (several seconds), which they need only to measure a GPU."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    return any(os.path.exists(path) for path in _GPU_DRIVER_FILES)


def _cuda_available() -> bool:
    if not gpu_driver_present():
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())
