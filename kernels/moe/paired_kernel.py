"""The fused experts launch with more bytes in flight per program (`deep_experts`).

Why: the fused experts launch (fused_kernel.py) gives each of its programs one expert's I-slice to
stream end to end with ONE tile prefetched: ~40 us per program, 2.8 TB/s for the launch on the H200,
bound by each program's round trips rather than by HBM (RESULTS.md, issue 17). Same grid, same math
here; only what is in flight changes, by one of two mechanisms (STAGES):
- STAGES == 0: tiles consumed in pairs while the next pair loads (two tiles ahead instead of one),
  into the same `[BLOCK_I, BLOCK_D]` fp32 accumulators;
- STAGES >= 2: plain loops handed to Triton's software pipeliner (`tl.range(num_stages=STAGES)`), which
  keeps STAGES - 1 tiles in flight through shared memory.
Summation order differs from fused_experts_kernel by fp32 rounding only.
"""

from __future__ import annotations

import triton
import triton.language as tl
from bubblescope.kernels._pdl import pdl_launch_dependents, pdl_wait
from bubblescope.kernels.moe.experts_kernel import clamped_swiglu, load_w13_tiles
from bubblescope.kernels.moe.fused_kernel import load_w2_tile
from bubblescope.kernels.moe.slot_routing import expert_and_gain
from bubblescope.kernels.rmsnorm.epilogue import last_program_add_rmsnorm


@triton.jit
def gate_up_deep(p_x_row, p_w13_e, o_i, m_i, D, INTER, limit, BLOCK_I: tl.constexpr, BLOCK_D: tl.constexpr,
                 STAGES: tl.constexpr):  # fmt: skip
    """h[o_i] of one expert and one token with more than one tile in flight (module docstring)."""
    b_acc_g = tl.zeros((BLOCK_I, BLOCK_D), dtype=tl.float32)
    b_acc_u = tl.zeros((BLOCK_I, BLOCK_D), dtype=tl.float32)
    if STAGES == 0:
        b_g0, b_u0 = load_w13_tiles(p_w13_e, o_i, m_i, 0, D, INTER, BLOCK_D)
        b_g1, b_u1 = load_w13_tiles(p_w13_e, o_i, m_i, BLOCK_D, D, INTER, BLOCK_D)
        for d_start in range(0, D, 2 * BLOCK_D):
            b_ng0, b_nu0 = load_w13_tiles(p_w13_e, o_i, m_i, d_start + 2 * BLOCK_D, D, INTER, BLOCK_D)
            b_ng1, b_nu1 = load_w13_tiles(p_w13_e, o_i, m_i, d_start + 3 * BLOCK_D, D, INTER, BLOCK_D)
            o_d0 = d_start + tl.arange(0, BLOCK_D)
            o_d1 = o_d0 + BLOCK_D
            b_x0 = tl.load(p_x_row + o_d0, mask=o_d0 < D, other=0.0).to(tl.float32)
            b_x1 = tl.load(p_x_row + o_d1, mask=o_d1 < D, other=0.0).to(tl.float32)
            b_acc_g += b_g0.to(tl.float32) * b_x0[None, :] + b_g1.to(tl.float32) * b_x1[None, :]
            b_acc_u += b_u0.to(tl.float32) * b_x0[None, :] + b_u1.to(tl.float32) * b_x1[None, :]
            b_g0, b_u0, b_g1, b_u1 = b_ng0, b_nu0, b_ng1, b_nu1
    else:
        for d_start in tl.range(0, D, BLOCK_D, num_stages=STAGES):
            b_g, b_u = load_w13_tiles(p_w13_e, o_i, m_i, d_start, D, INTER, BLOCK_D)
            o_d = d_start + tl.arange(0, BLOCK_D)
            b_x = tl.load(p_x_row + o_d, mask=o_d < D, other=0.0).to(tl.float32)
            b_acc_g += b_g.to(tl.float32) * b_x[None, :]
            b_acc_u += b_u.to(tl.float32) * b_x[None, :]
    return tl.where(m_i, clamped_swiglu(tl.sum(b_acc_g, axis=1), tl.sum(b_acc_u, axis=1), limit), 0.0)


@triton.jit
def down_deep(p_w2_e, p_y_row, b_h, m_i, D, INTER, BLOCK_DOUT: tl.constexpr, STAGES: tl.constexpr):
    """y_row[d] += sum_i w2[e, d, i] h[i] over this i-slice (fp32 atomics: other programs add other
    slices and slots), more than one `[BLOCK_DOUT, BLOCK_I]` tile in flight."""
    if STAGES == 0:
        b_w0 = load_w2_tile(p_w2_e, m_i, 0, D, INTER, BLOCK_DOUT)
        b_w1 = load_w2_tile(p_w2_e, m_i, BLOCK_DOUT, D, INTER, BLOCK_DOUT)
        for d_start in range(0, D, 2 * BLOCK_DOUT):
            b_nw0 = load_w2_tile(p_w2_e, m_i, d_start + 2 * BLOCK_DOUT, D, INTER, BLOCK_DOUT)
            b_nw1 = load_w2_tile(p_w2_e, m_i, d_start + 3 * BLOCK_DOUT, D, INTER, BLOCK_DOUT)
            o_d0 = d_start + tl.arange(0, BLOCK_DOUT)
            o_d1 = o_d0 + BLOCK_DOUT
            tl.atomic_add(p_y_row + o_d0, tl.sum(b_w0.to(tl.float32) * b_h[None, :], axis=1), mask=o_d0 < D,
                          sem="relaxed")  # fmt: skip
            tl.atomic_add(p_y_row + o_d1, tl.sum(b_w1.to(tl.float32) * b_h[None, :], axis=1), mask=o_d1 < D,
                          sem="relaxed")  # fmt: skip
            b_w0, b_w1 = b_nw0, b_nw1
    else:
        for d_start in tl.range(0, D, BLOCK_DOUT, num_stages=STAGES):
            b_w = load_w2_tile(p_w2_e, m_i, d_start, D, INTER, BLOCK_DOUT)
            o_d = d_start + tl.arange(0, BLOCK_DOUT)
            tl.atomic_add(p_y_row + o_d, tl.sum(b_w.to(tl.float32) * b_h[None, :], axis=1), mask=o_d < D,
                          sem="relaxed")  # fmt: skip


@triton.jit
def deep_experts_kernel(
    p_x,
    p_ids,
    p_weights,
    p_w13,
    p_w2,
    p_y,
    stride_xm,
    stride_w13e,
    stride_w2e,
    D,
    INTER,
    shared_slot,
    limit,
    shared_limit,
    p_logits,
    p_bias,
    E,
    scale,
    TOP_K: tl.constexpr,
    SLOTS: tl.constexpr,
    BLOCK_I: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_DOUT: tl.constexpr,
    USE_PDL: tl.constexpr,
    STAGES: tl.constexpr = 0,
    EARLY_SHARED: tl.constexpr = False,
    ROUTE_HERE: tl.constexpr = False,
    N_GROUP: tl.constexpr = 1,
    TOPK_GROUP: tl.constexpr = 1,
    RENORMALIZE: tl.constexpr = True,
    BLOCK_G: tl.constexpr = 1,
    BLOCK_PG: tl.constexpr = 1,
    BLOCK_TOPK: tl.constexpr = 1,
    NORM_EPILOGUE: tl.constexpr = False,
    p_res=None,
    p_norm_w=None,
    p_normed=None,
    p_norm_counter=None,
    eps=0.0,
    NORM_CHUNK: tl.constexpr = 1,
    NORM_CHUNKS: tl.constexpr = 1,
):
    """Launch 2 of the fused layer, grid (M * SLOTS, cdiv(I, BLOCK_I)) as fused_experts_kernel, the
    NORM_EPILOGUE (`norm_epilogue`) too.
    EARLY_SHARED: the shared slot's gate/up + SwiGLU before gdc_wait (safe for the reason given in
    fused_kernel.early_shared_h: x is complete when this grid starts); otherwise every slot waits.
    ROUTE_HERE (`routing_in_experts`): each program routes its row after the wait (slot_routing.py)."""
    i_ms = tl.program_id(0).to(tl.int64)
    i_blk = tl.program_id(1).to(tl.int64)
    i_m = i_ms // SLOTS
    slot = i_ms % SLOTS
    o_i = i_blk * BLOCK_I + tl.arange(0, BLOCK_I)
    m_i = o_i < INTER
    p_x_row = p_x + i_m * stride_xm
    if EARLY_SHARED and slot >= TOP_K:
        b_h = gate_up_deep(p_x_row, p_w13 + shared_slot * stride_w13e, o_i, m_i, D, INTER, shared_limit,
                           BLOCK_I, BLOCK_D, STAGES)  # fmt: skip
        pdl_wait(USE_PDL)
        pdl_launch_dependents(USE_PDL)
        expert = slot * 0 + shared_slot
    else:
        pdl_wait(USE_PDL)
        # After the wait: an earlier trigger lets a chain of kernels cascade (see gemv/kernel.py).
        pdl_launch_dependents(USE_PDL)
        expert, gain = expert_and_gain(
            p_ids, p_weights, p_logits, p_bias, i_m, slot, i_blk, shared_slot, E, scale, TOP_K, ROUTE_HERE,
            N_GROUP, TOPK_GROUP, RENORMALIZE, BLOCK_G, BLOCK_PG, BLOCK_TOPK,
        )  # fmt: skip
        slot_limit = tl.where(slot < TOP_K, limit, shared_limit)
        b_h = gate_up_deep(p_x_row, p_w13 + expert * stride_w13e, o_i, m_i, D, INTER, slot_limit, BLOCK_I,
                           BLOCK_D, STAGES)  # fmt: skip
        b_h = b_h * gain
    down_deep(
        p_w2 + expert * stride_w2e + o_i[None, :], p_y + i_m * D, b_h, m_i, D, INTER, BLOCK_DOUT, STAGES
    )
    if NORM_EPILOGUE:
        programs = tl.num_programs(0) * tl.num_programs(1)
        last_program_add_rmsnorm(
            p_y, p_res, p_norm_w, p_normed, p_norm_counter, programs, tl.num_programs(0) // SLOTS, D, eps,
            NORM_CHUNK, NORM_CHUNKS,
        )  # fmt: skip
