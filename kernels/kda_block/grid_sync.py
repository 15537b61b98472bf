"""Grid-wide barrier and the o_proj L2 prefetch of the one-launch KDA block (GPU only, never interpreted).

The barrier is one int32 arrival counter in global memory, the pattern of CUDA cooperative groups'
grid sync: a block barrier (every thread's stores of the phase are issued), one arrival with release
semantics at GPU scope, a spin on an acquire read until every program of the grid has arrived, a
block barrier again. Triton runs a scalar atomic on one thread and broadcasts its result, so each
spin iteration is one L2 round trip for the whole program. It needs every program of the grid
resident at once (the launcher sizes the grid from the SM count and the compiled kernel's
occupancy), and it deadlocks under the CPU interpreter, which runs programs one after another: the
kernel's PHASE constexpr runs the phases as three launches there instead.

Re-arming: the launch's barriers count up to P, then 2P; each program then adds a third arrival and
the one that draws the last ticket (3P - 1) resets the counter to zero. Every program had passed the
second barrier before its third arrival, so nobody still spins on the counter when it is reset, and
the next launch (next layer or CUDA-graph replay) starts from zero: its first arrival comes after
its `gdc_wait` (under PDL) or after this grid ended (without), i.e. after the reset.
"""

from __future__ import annotations

import triton
import triton.language as tl
from bubblescope.kernels.gemv.prefetch import prefetch_strip_l2


@triton.jit
def grid_barrier(p_count, target):
    """Wait until the counter at p_count reaches target, after adding this program's arrival."""
    tl.debug_barrier()
    tl.atomic_add(p_count, 1, sem="release", scope="gpu")
    arrived = tl.atomic_add(p_count, 0, sem="acquire", scope="gpu")
    while arrived < target:
        arrived = tl.atomic_add(p_count, 0, sem="acquire", scope="gpu")
    tl.debug_barrier()


@triton.jit
def rearm_grid_barrier(p_count, num_programs, BARRIERS: tl.constexpr):
    """After the last of BARRIERS barriers: the last program out resets the counter to zero."""
    ticket = tl.atomic_add(p_count, 1, sem="relaxed", scope="gpu")
    if ticket == (BARRIERS + 1) * num_programs - 1:
        tl.atomic_xchg(p_count, 0, sem="relaxed", scope="gpu")


@triton.jit
def prefetch_strips_l2(
    p_w, i_first, num_programs, N, K, stride_wn, BLOCK_N: tl.constexpr, LINES: tl.constexpr
):
    """Ask L2 (evict-last) for the weight rows of every strip this program will stream: strips i_first,
    i_first + num_programs, ... of BLOCK_N rows (kernels/gemv/prefetch.py, LINES lines a step)."""
    for i_n in range(i_first, tl.cdiv(N, BLOCK_N), num_programs):
        prefetch_strip_l2(p_w, tl.cast(i_n, tl.int64) * BLOCK_N, N, K, stride_wn, BLOCK_N, LINES, 2)
