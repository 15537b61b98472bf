"""Grid-wide barrier and L2 prefetch for the one-launch KDA block (GPU only: never run by the interpreter).

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
def prefetch_l2(p_line):
    """Ask L2 for the 128-byte lines at p_line (no registers, no wait: the data stays in L2)."""
    tl.inline_asm_elementwise(
        "prefetch.global.L2::evict_last [$1];\n\tmov.u32 $0, 0;",
        "=r,l",
        [p_line],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )


@triton.jit
def prefetch_strips_l2(
    p_w, i_first, num_programs, N, K, stride_wn, BLOCK_N: tl.constexpr, LINE: tl.constexpr
):
    """Prefetch into L2 the weight rows of every strip this program will stream (strips i_first,
    i_first + num_programs, ...; BLOCK_N rows of K elements each, LINE elements per 128-byte line)."""
    o_line = tl.arange(0, 128) * LINE
    for i_n in range(i_first, tl.cdiv(N, BLOCK_N), num_programs):
        o_n = tl.minimum(tl.cast(i_n, tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N), N - 1)
        for k_start in range(0, K, 128 * LINE):
            o_k = tl.minimum(k_start + o_line, K - 1)
            prefetch_l2(p_w + o_n[:, None] * stride_wn + o_k[None, :])
