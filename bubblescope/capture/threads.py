"""torch's intra-op threads for CPU runs: one by default, so CPU TPOT is stable.

On the 2-core CI box the debug preset's TPOT was 164-374 ms with torch's default threads and 31-37 ms
with one (issue 25; `benchmarks/bench_cpu_threads.py`, results in benchmarks/RESULTS.md): a decode
step is hundreds of small ops, each too small to split, and every split waits for the slowest thread,
which another process on the box may have descheduled. GPU runs are left alone.
"""

from __future__ import annotations

from typing import Any

from bubblescope.capture.setup import workload_on_cuda
from bubblescope.errors import ConfigError

CPU_THREADS_DEFAULT = 1
# torch's own default, read before the first change (a second run in the same process would see ours).
_torch_default: list[int] = []


def apply_cpu_threads(workload: Any, threads: int | None) -> str | None:
    """Set torch's intra-op threads for a CPU workload; returns the line saying so (None on a GPU).

    Args:
        threads: the user's --threads, or None for CPU_THREADS_DEFAULT.
    Raises:
        ConfigError: threads < 1.
    """
    if threads is not None and threads < 1:
        raise ConfigError(f"--threads must be >= 1, got {threads}")
    if workload_on_cuda(workload):
        return None
    import torch

    if not _torch_default:
        _torch_default.append(torch.get_num_threads())
    default = _torch_default[0]
    chosen = threads if threads is not None else CPU_THREADS_DEFAULT
    torch.set_num_threads(chosen)
    given = "--threads" if threads is not None else "the default; --threads N to change"
    plural = "s" if chosen != 1 else ""
    return f"CPU run: {chosen} intra-op thread{plural} ({given}; torch's own default here: {default})"
