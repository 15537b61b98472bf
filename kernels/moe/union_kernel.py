"""Experts launch of a window of M rows that streams each distinct expert ONCE (the `expert_union` switch).

`fused_experts_kernel` runs one program per (row, slot, I-slice): an expert that k rows of a verify
window chose is streamed k times, and the shared expert M times. With L2 catching some repeats the
DRAM bytes fall towards the union, but every program still walks its ~0.5 MB slice alone, and a
10-row window at E = 256 launches 10 x 9 x 24 = 2160 of them (one token: 216).

Here the grid is the same (M * SLOTS, cdiv(I, BLOCK_I)), but only the program holding an expert's
FIRST occurrence (lowest row, among that row's slots) works, for every row of the window that chose
it; the shared slot works in row 0 only, for all rows. The rest exit at once. A working program
loads the x tiles of all rows ([BLOCK_M, BLOCK_D], BLOCK_M = 16 >= M) and multiplies them into the
expert's gate/up tiles on tensor cores (tl.dot), scales each row's h by that row's routing gain
(0 for rows that did not choose the expert), then does the down projection as another tl.dot and
atomically adds the [rows, BLOCK_DOUT] partials of the rows that chose it. So the weights read are
the union of the window's experts, each once, in as many programs as there are distinct experts.
Summation order differs from the per-row kernel (tensor-core dot vs CUDA-core reduction): results
match to fp32 rounding, not bitwise; with `FusedMoEConfig.union_h_bf16x2` (the default since round 4)
the down products carry h as bf16 hi + lo, ~16 mantissa bits (1e-5 relative). Tiles and warps:
`FusedMoEConfig.union_*` (swept on the H200 by benchmarks/bench_verify_union.py).
"""

from __future__ import annotations

import triton
import triton.language as tl
from bubblescope.kernels._pdl import pdl_launch_dependents, pdl_wait
from bubblescope.kernels.moe.experts_kernel import clamped_swiglu, load_w13_tiles
from bubblescope.kernels.moe.fused_kernel import load_w2_tile


@triton.jit
def load_x_rows(p_x, o_m, m_m, d_start, D, stride_xm, BLOCK_D: tl.constexpr):
    """x[rows, d_start : d_start + BLOCK_D] as `[BLOCK_M, BLOCK_D]` (zero past M and D)."""
    o_d = d_start + tl.arange(0, BLOCK_D)
    return tl.load(
        p_x + o_m[:, None] * stride_xm + o_d[None, :], mask=m_m[:, None] & (o_d < D)[None, :], other=0.0
    )


@triton.jit
def dot_rows(b_a, b_b, DOT_FP32: tl.constexpr, PRECISION: tl.constexpr):
    """b_a `[M, K]` @ b_b `[K, N]` in fp32. DOT_FP32 upcasts both first (the CPU interpreter's bf16
    dot returns garbage, as in gemv/kernel.py); otherwise in the operands' dtype on tensor cores."""
    if DOT_FP32:
        return tl.dot(b_a.to(tl.float32), b_b.to(tl.float32), input_precision="ieee")
    return tl.dot(b_a, b_b, input_precision=PRECISION)


@triton.jit
def swiglu_window(
    p_x,
    p_w13_e,
    b_gate,
    b_up,
    o_m,
    m_m,
    o_i,
    m_i,
    stride_xm,
    D,
    INTER,
    limit,
    BLOCK_D: tl.constexpr,
    DOT_FP32: tl.constexpr,
    STAGES: tl.constexpr = 0,
):
    """h `[BLOCK_M, BLOCK_I]` = act(x W_gate^T) * (x W_up^T) for every row at once, from the first
    tiles already loaded; act = SiLU, clamped when limit > 0 (as swiglu_rows). 0 outside m_i.
    STAGES >= 2 (`deep_experts`): the loop goes to Triton's software pipeliner instead (STAGES - 1 tiles
    in flight through shared memory; the first tiles are loaded again there, from L2)."""
    b_acc_gate = tl.zeros((o_m.shape[0], o_i.shape[0]), dtype=tl.float32)
    b_acc_up = tl.zeros((o_m.shape[0], o_i.shape[0]), dtype=tl.float32)
    if STAGES == 0:
        for d_start in range(0, D, BLOCK_D):
            b_gate_next, b_up_next = load_w13_tiles(p_w13_e, o_i, m_i, d_start + BLOCK_D, D, INTER, BLOCK_D)
            b_x = load_x_rows(p_x, o_m, m_m, d_start, D, stride_xm, BLOCK_D).to(b_gate.dtype)
            b_acc_gate += dot_rows(b_x, tl.trans(b_gate), DOT_FP32, "ieee")
            b_acc_up += dot_rows(b_x, tl.trans(b_up), DOT_FP32, "ieee")
            b_gate, b_up = b_gate_next, b_up_next
    else:
        for d_start in tl.range(0, D, BLOCK_D, num_stages=STAGES):
            b_gate, b_up = load_w13_tiles(p_w13_e, o_i, m_i, d_start, D, INTER, BLOCK_D)
            b_x = load_x_rows(p_x, o_m, m_m, d_start, D, stride_xm, BLOCK_D).to(b_gate.dtype)
            b_acc_gate += dot_rows(b_x, tl.trans(b_gate), DOT_FP32, "ieee")
            b_acc_up += dot_rows(b_x, tl.trans(b_up), DOT_FP32, "ieee")
    return tl.where(m_i[None, :], clamped_swiglu(b_acc_gate, b_acc_up, limit), 0.0)


@triton.jit
def down_part(b_h, b_h_hi, b_h_lo, b_w2, DOT_FP32: tl.constexpr, H_BF16X2: tl.constexpr):
    """One `[BLOCK_M, BLOCK_DOUT]` partial of the down projection (see down_window)."""
    if H_BF16X2:
        b_w2_t = tl.trans(b_w2)
        return dot_rows(b_h_hi, b_w2_t, DOT_FP32, "ieee") + dot_rows(b_h_lo, b_w2_t, DOT_FP32, "ieee")
    return dot_rows(b_h, tl.trans(b_w2.to(tl.float32)), DOT_FP32, "tf32x3")


@triton.jit
def down_window(
    p_w2,
    p_y,
    b_h,
    expert,
    o_m,
    m_rows,
    o_i,
    m_i,
    stride_w2e,
    D,
    INTER,
    BLOCK_DOUT: tl.constexpr,
    DOT_FP32: tl.constexpr,
    STAGES: tl.constexpr = 0,
    H_BF16X2: tl.constexpr = False,
):
    """y[rows] += b_h `[BLOCK_M, BLOCK_I]` @ w2[expert, :, i-slice]^T, atomically, rows in m_rows only.
    fp32 h on tensor cores as tf32x3 (three tf32 products: about fp32 accuracy; the bf16 w2 tile is
    converted to fp32 first). H_BF16X2 (bf16 w2 only): h split into bf16 hi + lo parts, two bf16 products
    with the w2 tile as loaded (h to ~16 mantissa bits, no conversion of w2). STAGES as swiglu_window."""
    # Used by H_BF16X2 only (dead code otherwise, removed by the compiler).
    b_h_hi = b_h.to(tl.bfloat16)
    b_h_lo = (b_h - b_h_hi.to(tl.float32)).to(tl.bfloat16)
    p_w2_e = p_w2 + expert * stride_w2e + o_i[None, :]
    if STAGES == 0:
        b_w2 = load_w2_tile(p_w2_e, m_i, 0, D, INTER, BLOCK_DOUT)
        for d_start in range(0, D, BLOCK_DOUT):
            b_w2_next = load_w2_tile(p_w2_e, m_i, d_start + BLOCK_DOUT, D, INTER, BLOCK_DOUT)
            o_d = d_start + tl.arange(0, BLOCK_DOUT)
            b_part = down_part(b_h, b_h_hi, b_h_lo, b_w2, DOT_FP32, H_BF16X2)
            tl.atomic_add(
                p_y + o_m[:, None] * D + o_d[None, :],
                b_part,
                mask=m_rows[:, None] & (o_d < D)[None, :],
                sem="relaxed",
            )
            b_w2 = b_w2_next
    else:
        for d_start in tl.range(0, D, BLOCK_DOUT, num_stages=STAGES):
            b_w2 = load_w2_tile(p_w2_e, m_i, d_start, D, INTER, BLOCK_DOUT)
            o_d = d_start + tl.arange(0, BLOCK_DOUT)
            b_part = down_part(b_h, b_h_hi, b_h_lo, b_w2, DOT_FP32, H_BF16X2)
            tl.atomic_add(
                p_y + o_m[:, None] * D + o_d[None, :],
                b_part,
                mask=m_rows[:, None] & (o_d < D)[None, :],
                sem="relaxed",
            )


@triton.jit
def union_experts_kernel(
    p_x,
    p_ids,
    p_weights,
    p_w13,
    p_w2,
    p_y,
    M,
    stride_xm,
    stride_w13e,
    stride_w2e,
    D,
    INTER,
    shared_slot,
    limit,
    shared_limit,
    TOP_K: tl.constexpr,
    SLOTS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_TOPK: tl.constexpr,
    BLOCK_I: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_DOUT: tl.constexpr,
    USE_PDL: tl.constexpr,
    DOT_FP32: tl.constexpr,
    EARLY_SHARED: tl.constexpr = False,
    STAGES: tl.constexpr = 0,
    H_BF16X2: tl.constexpr = False,
):
    """Grid (M * SLOTS, cdiv(I, BLOCK_I)); see the module docstring. EARLY_SHARED (`early_shared`):
    the shared expert's gate/up + SwiGLU before `gdc_wait` (x is complete then, see fused_kernel.py).
    H_BF16X2: the down products as two bf16 ones (down_window)."""
    i_ms = tl.program_id(0).to(tl.int64)
    i_blk = tl.program_id(1).to(tl.int64)
    i_m = i_ms // SLOTS
    slot = i_ms % SLOTS
    o_m = tl.arange(0, BLOCK_M)
    m_m = o_m < M
    o_i = i_blk * BLOCK_I + tl.arange(0, BLOCK_I)
    m_i = o_i < INTER
    if slot >= TOP_K:
        # The shared expert: row 0's program serves every row (gain 1); the others have nothing to do.
        if i_m == 0:
            p_w13_e = p_w13 + shared_slot * stride_w13e
            b_gate, b_up = load_w13_tiles(p_w13_e, o_i, m_i, 0, D, INTER, BLOCK_D)
            # Without EARLY_SHARED the shared expert waits like every slot; with it, only its down
            # projection does (its atomics need the zeroed y).
            if not EARLY_SHARED:
                pdl_wait(USE_PDL)
                pdl_launch_dependents(USE_PDL)
            b_h = swiglu_window(
                p_x, p_w13_e, b_gate, b_up, o_m, m_m, o_i, m_i, stride_xm, D, INTER, shared_limit, BLOCK_D,
                DOT_FP32, STAGES,
            )  # fmt: skip
            if EARLY_SHARED:
                pdl_wait(USE_PDL)
                pdl_launch_dependents(USE_PDL)
            down_window(
                p_w2,
                p_y,
                b_h,
                shared_slot,
                o_m,
                m_m,
                o_i,
                m_i,
                stride_w2e,
                D,
                INTER,
                BLOCK_DOUT,
                DOT_FP32,
                STAGES,
                H_BF16X2,
            )
    else:
        pdl_wait(USE_PDL)
        pdl_launch_dependents(USE_PDL)
        expert = tl.load(p_ids + i_m * TOP_K + slot).to(tl.int64)
        o_k = tl.arange(0, BLOCK_TOPK)
        m_window = m_m[:, None] & (o_k < TOP_K)[None, :]
        b_ids = tl.load(p_ids + o_m[:, None] * TOP_K + o_k[None, :], mask=m_window, other=-1).to(tl.int64)
        b_hit = b_ids == expert
        # Rows that chose this expert (a row's top-k ids are distinct: at most one slot per row).
        m_rows = tl.max(b_hit.to(tl.int32), axis=1) > 0
        first_row = tl.min(tl.where(m_rows, o_m, BLOCK_M), axis=0)
        if first_row == i_m:
            b_gains = tl.sum(
                tl.where(
                    b_hit,
                    tl.load(p_weights + o_m[:, None] * TOP_K + o_k[None, :], mask=m_window, other=0.0),
                    0.0,
                ),
                axis=1,
            )
            p_w13_e = p_w13 + expert * stride_w13e
            b_gate, b_up = load_w13_tiles(p_w13_e, o_i, m_i, 0, D, INTER, BLOCK_D)
            b_h = swiglu_window(
                p_x,
                p_w13_e,
                b_gate,
                b_up,
                o_m,
                m_m,
                o_i,
                m_i,
                stride_xm,
                D,
                INTER,
                limit,
                BLOCK_D,
                DOT_FP32,
                STAGES,
            )
            b_h = b_h * b_gains[:, None]
            down_window(
                p_w2,
                p_y,
                b_h,
                expert,
                o_m,
                m_rows,
                o_i,
                m_i,
                stride_w2e,
                D,
                INTER,
                BLOCK_DOUT,
                DOT_FP32,
                STAGES,
                H_BF16X2,
            )
