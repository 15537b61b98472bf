"""The KDA block of one decoder layer at batch 1 as ONE persistent launch (issue 27's megakernel try).

Today the block is three launches chained under PDL: in_proj GEMV `[5W + H, D]` -> kda_decode (V
split) -> o_proj GEMV `[D, W]`. Each hand-off costs a launch's tail (the slowest strip), the next
grid's ramp and the PDL wait. Here a grid of P programs (every SM slot of the device, all resident)
runs the three phases with grid-wide barriers between them (grid_sync.py):

    phase 1  in_proj strips pid, pid + P, ...           (x read after `gdc_wait`)
             phase-2 loads (conv windows, fp32 state slice), the first o_proj tile, and (L2_PREFETCH)
             every o_proj row this program will stream, prefetched into L2
    barrier
    phase 2  one V slice of one head's KDA update (the last H * NV programs; kda_phase.py)
    barrier
    phase 3  o_proj strips pid, pid + P, ... (the first from registers, the rest mostly from L2)

Weights and state never depend on the earlier phases, so their loads are issued before the barriers
and the block streams its bytes without launch gaps. The strips reuse kernels/gemv's helpers with the
decoder's GEMV tiles, and phase 2 is the split kernel's math: the result is bit-identical to the three
launches. PHASE 1, 2 or 3 runs only that phase (three launches of this same code: the CPU interpreter,
which runs programs one after another and would deadlock at a spin barrier, and the A/B arm);
PHASE 0 runs all three in one launch (GPU only).

Measured on one H200 (benchmarks/RESULTS.md, issue 27 round 4): bit-identical to the three launches but
5.3 us per layer SLOWER (44.9 vs 39.6 us): the persistent strip loops stream in_proj at 3.55 TB/s where the
GEMV's one-strip programs reach 4.01 (each strip's first tile waits for the previous strip's reduction),
and the o_proj's 640 strips share out unevenly over 528 programs; the barriers themselves cost less than
the launch hand-offs. So it is a benchmark arm (benchmarks/bench_kda_block.py), not a decoder switch.
"""

from __future__ import annotations

import triton
import triton.language as tl
from bubblescope.kernels._pdl import pdl_launch_dependents, pdl_wait
from bubblescope.kernels.gemv.kernel import gemv_strip, load_weight_tile, row_strip_2d
from bubblescope.kernels.kda_block.grid_sync import grid_barrier, prefetch_strips_l2, rearm_grid_barrier
from bubblescope.kernels.kda_block.kda_phase import kda_slice_phase


@triton.jit
def store_strip(p_y, i_n, N, acc, BLOCK_N: tl.constexpr):
    """y[i_n * BLOCK_N : (i_n + 1) * BLOCK_N] <- acc `[1, BLOCK_N]` in y's dtype."""
    o_n = i_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(p_y + o_n[None, :], acc.to(p_y.dtype.element_ty), mask=(o_n < N)[None, :])


@triton.jit
def gemv_strips(
    p_x, p_w, p_y, i_first, num_programs, N, K, stride_wn, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr
):
    """y = x @ W^T on strips i_first, i_first + num_programs, ... (gemv_kernel's M == 1 path)."""
    for i_n in range(i_first, tl.cdiv(N, BLOCK_N), num_programs):
        acc = gemv_strip(
            p_x, p_w, tl.cast(i_n, tl.int64), 1, N, K, 0, stride_wn, 1, BLOCK_N, BLOCK_K, False, False, True
        )
        store_strip(p_y, tl.cast(i_n, tl.int64), N, acc, BLOCK_N)


@triton.jit
def gemv_strips_from(
    p_x, p_w, p_y, b_w, i_prog, num_programs, N, K, stride_wn, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr
):
    """gemv_strips from strip i_prog, whose first weight tile b_w is already loaded."""
    i_n = i_prog.to(tl.int64)
    o_n = i_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = row_strip_2d(p_x, p_w, o_n, o_n < N, b_w, K, stride_wn, BLOCK_N, BLOCK_K, False)
    store_strip(p_y, i_n, N, acc, BLOCK_N)
    gemv_strips(p_x, p_w, p_y, i_prog + num_programs, num_programs, N, K, stride_wn, BLOCK_N, BLOCK_K)


@triton.jit
def first_tile(p_w, i_prog, N, K, stride_wn, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """The first weight tile of strip i_prog (all masked past N: no traffic)."""
    o_n = i_prog.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    return load_weight_tile(p_w, o_n, o_n < N, 0, K, stride_wn, BLOCK_K, False)


@triton.jit
def kda_block_kernel(
    p_x,
    p_w_in,
    p_proj,
    p_q,
    p_k,
    p_v,
    p_f,
    p_b,
    p_gate,
    p_q_conv_w,
    p_k_conv_w,
    p_v_conv_w,
    p_a_log,
    p_dt_bias,
    p_o_norm,
    p_q_state,
    p_k_state,
    p_v_state,
    p_state,
    p_attn,
    p_ws_o,
    p_ws_count,
    p_w_out,
    p_y,
    p_barrier,
    N_IN,
    D,
    N_OUT,
    stride_w_in,
    stride_w_out,
    H,
    K,
    V,
    V_SLICE,
    lower_bound,
    scale,
    eps,
    PHASE: tl.constexpr,
    NUM_V_SPLITS: tl.constexpr,
    KW: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_V: tl.constexpr,
    BLOCK_VS: tl.constexpr,
    IN_BLOCK_N: tl.constexpr,
    IN_BLOCK_K: tl.constexpr,
    OUT_BLOCK_N: tl.constexpr,
    OUT_BLOCK_K: tl.constexpr,
    L2_PREFETCH: tl.constexpr,
    PREFETCH_LINES: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    """Grid (P,): proj = x @ W_in^T (`[1, N_IN]`), attn = KDA(proj) (`[1, H*V]`), y = attn @ W_out^T
    (`[1, N_OUT]`); PHASE 0 all three with grid barriers, 1/2/3 one of them (module docstring)."""
    i_prog = tl.program_id(0)
    num_programs = tl.num_programs(0)
    width = H * V
    if PHASE == 0 or PHASE == 1:
        # The first strip's first weight tile before `gdc_wait`, the trigger after it (gemv_strip).
        i_n = i_prog.to(tl.int64)
        acc = gemv_strip(
            p_x, p_w_in, i_n, 1, N_IN, D, 0, stride_w_in, 1, IN_BLOCK_N, IN_BLOCK_K, USE_PDL, False, True
        )
        store_strip(p_proj, i_n, N_IN, acc, IN_BLOCK_N)
        gemv_strips(
            p_x, p_w_in, p_proj, i_prog + num_programs, num_programs, N_IN, D, stride_w_in,
            IN_BLOCK_N, IN_BLOCK_K,
        )  # fmt: skip
    if PHASE == 0:
        b_w_out = first_tile(p_w_out, i_prog, N_OUT, width, stride_w_out, OUT_BLOCK_N, OUT_BLOCK_K)
        if L2_PREFETCH:
            prefetch_strips_l2(
                p_w_out, i_prog, num_programs, N_OUT, width, stride_w_out, OUT_BLOCK_N, PREFETCH_LINES
            )
    if PHASE == 0 or PHASE == 2:
        kda_slice_phase(
            p_q, p_k, p_v, p_f, p_b, p_gate,
            p_q_conv_w, p_k_conv_w, p_v_conv_w, p_a_log, p_dt_bias, p_o_norm,
            p_q_state, p_k_state, p_v_state, p_state, p_attn, p_ws_o, p_ws_count, p_barrier,
            i_prog, num_programs, H, K, V, V_SLICE, lower_bound, scale, eps,
            NUM_V_SPLITS, KW, BLOCK_T, BLOCK_K, BLOCK_V, BLOCK_VS, USE_PDL, PHASE == 0,
        )  # fmt: skip
    if PHASE == 0:
        grid_barrier(p_barrier, 2 * num_programs)
        gemv_strips_from(
            p_attn, p_w_out, p_y, b_w_out, i_prog, num_programs, N_OUT, width, stride_w_out,
            OUT_BLOCK_N, OUT_BLOCK_K,
        )  # fmt: skip
        rearm_grid_barrier(p_barrier, num_programs, 2)
    if PHASE == 3:
        b_w_out = first_tile(p_w_out, i_prog, N_OUT, width, stride_w_out, OUT_BLOCK_N, OUT_BLOCK_K)
        pdl_wait(USE_PDL)
        pdl_launch_dependents(USE_PDL)
        gemv_strips_from(
            p_attn, p_w_out, p_y, b_w_out, i_prog, num_programs, N_OUT, width, stride_w_out,
            OUT_BLOCK_N, OUT_BLOCK_K,
        )  # fmt: skip
