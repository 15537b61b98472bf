"""How many programs of a compiled Triton kernel the whole GPU holds at once (a persistent grid's size).

A grid-wide spin barrier deadlocks if one program of the grid cannot become resident until another
has finished, so the one-launch KDA block sizes its grid from the CUDA driver's own occupancy answer
for the compiled function (registers, shared memory, warps), times the SM count. Asking the driver
rather than recomputing it from the register count keeps the allocation-granularity rules out of
this code.
"""

from __future__ import annotations

import ctypes
import functools

from bubblescope.kernels.gemv.checks import KernelInputError


@functools.cache
def _libcuda() -> ctypes.CDLL:
    return ctypes.CDLL("libcuda.so.1")


def blocks_per_sm(function_handle: int, threads_per_block: int, dynamic_shared_bytes: int) -> int:
    """cuOccupancyMaxActiveBlocksPerMultiprocessor for a loaded CUfunction."""
    blocks = ctypes.c_int(0)
    status = _libcuda().cuOccupancyMaxActiveBlocksPerMultiprocessor(
        ctypes.byref(blocks),
        ctypes.c_void_p(function_handle),
        ctypes.c_int(threads_per_block),
        ctypes.c_size_t(dynamic_shared_bytes),
    )
    if status != 0:
        raise KernelInputError(
            f"kda_block: cuOccupancyMaxActiveBlocksPerMultiprocessor failed (CUresult {status})"
        )
    return blocks.value


def resident_programs(compiled, num_warps: int, multiprocessor_count: int) -> tuple[int, dict[str, int]]:
    """(programs the GPU holds at once, the facts behind it) for a compiled, not yet launched kernel.

    Args:
        compiled: triton's CompiledKernel (from `kernel.warmup(...)`).
        num_warps: warps per program it was compiled for.
        multiprocessor_count: SMs of the device.
    """
    compiled._init_handles()
    shared_bytes = int(compiled.metadata.shared)
    per_sm = blocks_per_sm(int(compiled.function), 32 * num_warps, shared_bytes)
    if per_sm < 1:
        raise KernelInputError("kda_block: the compiled kernel does not fit on one SM")
    facts = {
        "registers": int(compiled.n_regs),
        "spills": int(compiled.n_spills),
        "shared_bytes": shared_bytes,
        "programs_per_sm": per_sm,
        "sms": multiprocessor_count,
    }
    return per_sm * multiprocessor_count, facts
