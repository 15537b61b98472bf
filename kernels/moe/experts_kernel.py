"""Triton SwiGLU expert pieces shared by the unfused and fused MoE paths.

Expert slots per token: TOP_K routed slots (ids from routing) then, with HAS_SHARED, one slot for
the shared expert stacked into the same w13/w2 tensors ("shared expert as an extra expert slot").
w13[e] is `[2I, D]`: gate rows [0, I), then up rows [I, 2I).
"""

from __future__ import annotations

import triton
import triton.language as tl
from bubblescope.kernels._pdl import pdl_launch_dependents, pdl_wait
from bubblescope.kernels.rmsnorm.epilogue import last_program_add_rmsnorm


@triton.jit
def expert_of_slot(p_ids, p_weights, i_m, slot, shared_slot, TOP_K: tl.constexpr):
    """(expert index, gain) of slot `slot` of token i_m; the shared slot (slot == TOP_K) has gain 1."""
    i_read = i_m * TOP_K + tl.minimum(slot, TOP_K - 1)
    is_routed = slot < TOP_K
    expert = tl.where(is_routed, tl.load(p_ids + i_read).to(tl.int64), shared_slot)
    gain = tl.where(is_routed, tl.load(p_weights + i_read).to(tl.float32), 1.0)
    return expert, gain


@triton.jit
def load_w13_tiles(p_w13_e, o_i, m_i, d_start, D, INTER, BLOCK_D: tl.constexpr):
    """Gate and up tiles `[BLOCK_I, BLOCK_D]` of an expert from column d_start; no reads outside m_i."""
    o_d = d_start + tl.arange(0, BLOCK_D)
    m_w = m_i[:, None] & (o_d < D)[None, :]
    p_gate = p_w13_e + o_i[:, None] * D + o_d[None, :]
    b_gate = tl.load(p_gate, mask=m_w, other=0.0)
    b_up = tl.load(p_gate + INTER * D, mask=m_w, other=0.0)
    return b_gate, b_up


@triton.jit
def swiglu_rows(
    p_x_row,
    p_w13_e,
    b_gate,
    b_up,
    o_i,
    m_i,
    D,
    INTER,
    limit,
    BLOCK_D: tl.constexpr,
    ACC_2D: tl.constexpr = False,
):
    """h[o_i] = act(gate . x) * up . x for one expert and one token, starting from the first tiles
    already loaded (so PDL can fetch them early). act = SiLU, clamped when limit > 0:
    min(SiLU(g), L) * clamp(u, -L, L). Returns `[BLOCK_I]` fp32, 0 outside m_i.
    ACC_2D accumulates elementwise and reduces over D once at the end (no per-tile shuffles and
    barrier), at the price of two [BLOCK_I, BLOCK_D] fp32 accumulators in registers."""
    if ACC_2D:
        b_acc_gate2 = tl.zeros(b_gate.shape, dtype=tl.float32)
        b_acc_up2 = tl.zeros(b_gate.shape, dtype=tl.float32)
        for d_start in range(0, D, BLOCK_D):
            b_gate_next, b_up_next = load_w13_tiles(p_w13_e, o_i, m_i, d_start + BLOCK_D, D, INTER, BLOCK_D)
            o_d = d_start + tl.arange(0, BLOCK_D)
            b_x = tl.load(p_x_row + o_d, mask=o_d < D, other=0.0).to(tl.float32)
            b_acc_gate2 += b_gate.to(tl.float32) * b_x[None, :]
            b_acc_up2 += b_up.to(tl.float32) * b_x[None, :]
            b_gate, b_up = b_gate_next, b_up_next
        b_acc_gate = tl.sum(b_acc_gate2, axis=1)
        b_acc_up = tl.sum(b_acc_up2, axis=1)
    else:
        b_acc_gate = tl.zeros((b_gate.shape[0],), dtype=tl.float32)
        b_acc_up = tl.zeros((b_gate.shape[0],), dtype=tl.float32)
        for d_start in range(0, D, BLOCK_D):
            b_gate_next, b_up_next = load_w13_tiles(p_w13_e, o_i, m_i, d_start + BLOCK_D, D, INTER, BLOCK_D)
            o_d = d_start + tl.arange(0, BLOCK_D)
            b_x = tl.load(p_x_row + o_d, mask=o_d < D, other=0.0).to(tl.float32)
            b_acc_gate += tl.sum(b_gate.to(tl.float32) * b_x[None, :], axis=1)
            b_acc_up += tl.sum(b_up.to(tl.float32) * b_x[None, :], axis=1)
            b_gate, b_up = b_gate_next, b_up_next
    return tl.where(m_i, clamped_swiglu(b_acc_gate, b_acc_up, limit), 0.0)


@triton.jit
def clamped_swiglu(b_gate, b_up, limit):
    """The experts' activation, elementwise in fp32: SiLU(g) * u, or min(SiLU(g), L) * clamp(u, -L, L)
    when the clamp L = limit > 0 (every experts kernel takes it from here)."""
    b_act = b_gate * tl.sigmoid(b_gate)
    b_act = tl.where(limit > 0, tl.minimum(b_act, limit), b_act)
    b_up = tl.where(limit > 0, tl.minimum(tl.maximum(b_up, -limit), limit), b_up)
    return b_act * b_up


@triton.jit
def gate_up_kernel(
    p_x,
    p_ids,
    p_weights,
    p_w13,
    p_h,
    stride_xm,
    stride_w13e,
    D,
    INTER,
    shared_slot,
    limit,
    shared_limit,
    TOP_K: tl.constexpr,
    SLOTS: tl.constexpr,
    BLOCK_I: tl.constexpr,
    BLOCK_D: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    """Unfused step 1. Grid (M * SLOTS, cdiv(I, BLOCK_I)): h[m, slot, i-slice] (fp32 workspace)."""
    i_ms = tl.program_id(0).to(tl.int64)
    i_blk = tl.program_id(1).to(tl.int64)
    i_m = i_ms // SLOTS
    slot = i_ms % SLOTS
    o_i = i_blk * BLOCK_I + tl.arange(0, BLOCK_I)
    m_i = o_i < INTER
    pdl_wait(USE_PDL)
    # After the wait: an earlier trigger lets a chain of kernels cascade (see gemv/kernel.py).
    pdl_launch_dependents(USE_PDL)
    expert, _gain = expert_of_slot(p_ids, p_weights, i_m, slot, shared_slot, TOP_K)
    p_w13_e = p_w13 + expert * stride_w13e
    b_gate, b_up = load_w13_tiles(p_w13_e, o_i, m_i, 0, D, INTER, BLOCK_D)
    slot_limit = tl.where(slot < TOP_K, limit, shared_limit)
    b_h = swiglu_rows(p_x + i_m * stride_xm, p_w13_e, b_gate, b_up, o_i, m_i, D, INTER, slot_limit, BLOCK_D)
    tl.store(p_h + i_ms * INTER + o_i, b_h, mask=m_i)


@triton.jit
def down_kernel(
    p_h,
    p_ids,
    p_weights,
    p_w2,
    p_y,
    stride_w2e,
    stride_ym,
    D,
    INTER,
    shared_slot,
    TOP_K: tl.constexpr,
    SLOTS: tl.constexpr,
    BLOCK_DOUT: tl.constexpr,
    BLOCK_I: tl.constexpr,
    USE_PDL: tl.constexpr,
    NORM_EPILOGUE: tl.constexpr = False,
    p_res=None,
    p_norm_w=None,
    p_normed=None,
    p_norm_counter=None,
    eps=0.0,
    NORM_CHUNK: tl.constexpr = 1,
    NORM_CHUNKS: tl.constexpr = 1,
):
    """Unfused step 2. Grid (M, cdiv(D, BLOCK_DOUT)): y[m, d] = sum_slot gain w2[e_slot, d, :].h[m, slot].
    NORM_EPILOGUE (`norm_epilogue`, y contiguous): the last program by ticket adds y into p_res and
    writes the next block's normed rows (kernels/rmsnorm/epilogue.py)."""
    i_m = tl.program_id(0).to(tl.int64)
    i_blk = tl.program_id(1).to(tl.int64)
    o_d = i_blk * BLOCK_DOUT + tl.arange(0, BLOCK_DOUT)
    m_d = o_d < D
    pdl_wait(USE_PDL)
    # After the wait: an earlier trigger lets a chain of kernels cascade (see gemv/kernel.py).
    pdl_launch_dependents(USE_PDL)
    b_y = tl.zeros((BLOCK_DOUT,), dtype=tl.float32)
    for slot in range(0, SLOTS):
        expert, gain = expert_of_slot(p_ids, p_weights, i_m, slot, shared_slot, TOP_K)
        b_part = tl.zeros((BLOCK_DOUT,), dtype=tl.float32)
        for i_start in range(0, INTER, BLOCK_I):
            o_i = i_start + tl.arange(0, BLOCK_I)
            m_i = o_i < INTER
            b_h = tl.load(p_h + (i_m * SLOTS + slot) * INTER + o_i, mask=m_i, other=0.0)
            b_w2 = tl.load(
                p_w2 + expert * stride_w2e + o_d[:, None] * INTER + o_i[None, :],
                mask=m_d[:, None] & m_i[None, :],
                other=0.0,
            )
            b_part += tl.sum(b_w2.to(tl.float32) * b_h[None, :], axis=1)
        b_y += gain * b_part
    tl.store(p_y + i_m * stride_ym + o_d, b_y.to(p_y.dtype.element_ty), mask=m_d)
    if NORM_EPILOGUE:
        programs = tl.num_programs(0) * tl.num_programs(1)
        last_program_add_rmsnorm(
            p_y, p_res, p_norm_w, p_normed, p_norm_counter, programs, tl.num_programs(0), D, eps, NORM_CHUNK,
            NORM_CHUNKS,
        )  # fmt: skip
