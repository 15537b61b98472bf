"""The fused experts launch with its weight tiles brought by Hopper bulk copies (TMA descriptors).

Why: `deep_experts` (paired_kernel.py) keeps two tiles per program in flight in REGISTERS: at 64-row
slices and 8 warps it compiles to 255 registers and a 320 B stack (offline sm_90 compile), so one
program fills an SM's register file, the 108 programs of the e256 layer occupy 108 of the 132 SMs and
the experts launch cannot start on an SM the router launch still holds. The layer ran at 2.92 TB/s
against a ~4.1 TB/s copy ceiling (RESULTS.md, issue 27). Here each weight tile is a TMA copy into
shared memory (host-built 2D descriptors over the stacked w13 as `[S * 2I, D]` and w2 as `[S * D, I]`:
the expert is a row coordinate, so no device-side descriptor and no allocator), and Triton's pipeliner keeps
STAGES - 1 copies in flight per program through shared memory instead of registers. Two ways to use a
tile once it has landed (DOT):
- DOT False: read into registers and multiplied elementwise into `[BLOCK_I, BLOCK_D]` accumulators
  (the deep kernel's math);
- DOT True: a tensor-core dot reads the tile straight from shared memory: the token's row rides in
  column 0 (and its bf16 rounding remainders in columns 1 and 2, so the product keeps fp32 accuracy)
  of a 16-column operand; registers then hold only a `[BLOCK_I, 16]` accumulator.
Same grid, slots, routing and PDL placement as the deep kernel; summation order differs by rounding.
"""

from __future__ import annotations

import triton
import triton.language as tl
from bubblescope.kernels._pdl import pdl_launch_dependents, pdl_wait
from bubblescope.kernels.moe.experts_kernel import clamped_swiglu
from bubblescope.kernels.moe.slot_routing import expert_and_gain
from bubblescope.kernels.rmsnorm.epilogue import last_program_add_rmsnorm

# Columns of the dot's narrow operand (tl.dot needs >= 16): the row, its remainder, then zeros.
DOT_N = tl.constexpr(16)


@triton.jit
def split_columns(b_v, dtype: tl.constexpr):
    """`[K]` fp32 vector -> `[K, DOT_N]` in `dtype`: column 0 the vector rounded to dtype, columns 1 and
    2 what that rounding lost (rounded twice more: 3 x 8 bits cover fp32's 24), zeros elsewhere; a dot
    against it summed over its columns is as accurate as an fp32 product (bf16 x: columns 1, 2 are 0)."""
    b_0 = b_v.to(dtype)
    b_rest = b_v - b_0.to(tl.float32)
    b_1 = b_rest.to(dtype)
    b_2 = (b_rest - b_1.to(tl.float32)).to(dtype)
    o_n = tl.arange(0, DOT_N)[None, :]
    b_zero = tl.zeros_like(b_0[:, None])
    return tl.where(
        o_n == 0, b_0[:, None], tl.where(o_n == 1, b_1[:, None], tl.where(o_n == 2, b_2[:, None], b_zero))
    )


@triton.jit
def dot_acc(b_w, b_cols, b_acc, DOT_FP32: tl.constexpr):
    """b_acc `[R, DOT_N]` + b_w `[R, K]` @ b_cols `[K, DOT_N]` in fp32 (the row's product is the sum
    over the columns, taken once after the loop). DOT_FP32 (the CPU interpreter, fp32 weights): both
    operands in fp32, exact products; else on tensor cores, the tile read from shared memory."""
    if DOT_FP32:
        return tl.dot(b_w.to(tl.float32), b_cols.to(tl.float32), b_acc, input_precision="ieee")
    return tl.dot(b_w, b_cols, b_acc)


@triton.jit
def gate_up_tma(d_w13, x_src, i_m, expert, i_start, m_i, D, INTER, limit, BLOCK_I: tl.constexpr,
                BLOCK_D: tl.constexpr, STAGES: tl.constexpr, DOT: tl.constexpr, DOT_FP32: tl.constexpr,
                X_DESC: tl.constexpr):  # fmt: skip
    """h[i_start : i_start + BLOCK_I] of one expert and one token, gate and up tiles by TMA. X_DESC: x_src
    is a descriptor of x `[M, D]` (blocks [1, BLOCK_D]) and x's tiles join the pipelined copies: a plain
    load of x in the loop is not pipelined, so each tile would wait one L2 round trip for its x; else
    x_src points at the token's row."""
    row = (expert * 2 * INTER + i_start).to(tl.int32)
    if DOT:
        b_acc_g = tl.zeros((BLOCK_I, DOT_N), dtype=tl.float32)
        b_acc_u = tl.zeros((BLOCK_I, DOT_N), dtype=tl.float32)
    else:
        b_acc_g = tl.zeros((BLOCK_I, BLOCK_D), dtype=tl.float32)
        b_acc_u = tl.zeros((BLOCK_I, BLOCK_D), dtype=tl.float32)
    for d_start in tl.range(0, D, BLOCK_D, num_stages=STAGES):
        b_gate = d_w13.load([row, d_start])
        b_up = d_w13.load([row + INTER, d_start])
        o_d = d_start + tl.arange(0, BLOCK_D)
        if X_DESC:
            b_x = x_src.load([i_m.to(tl.int32), d_start]).reshape(BLOCK_D).to(tl.float32)
        else:
            b_x = tl.load(x_src + o_d, mask=o_d < D, other=0.0).to(tl.float32)
        if DOT:
            b_cols = split_columns(b_x, b_gate.dtype)
            b_acc_g = dot_acc(b_gate, b_cols, b_acc_g, DOT_FP32)
            b_acc_u = dot_acc(b_up, b_cols, b_acc_u, DOT_FP32)
        else:
            b_acc_g += b_gate.to(tl.float32) * b_x[None, :]
            b_acc_u += b_up.to(tl.float32) * b_x[None, :]
    b_g = tl.sum(b_acc_g, axis=1)
    b_u = tl.sum(b_acc_u, axis=1)
    # Rows past INTER (a partial last slice) read the following rows of w13: discarded here.
    return tl.where(m_i, clamped_swiglu(b_g, b_u, limit), 0.0)


@triton.jit
def down_tma(d_w2, p_y_row, b_h, expert, i_start, D, BLOCK_I: tl.constexpr, BLOCK_DOUT: tl.constexpr,
             STAGES: tl.constexpr, DOT: tl.constexpr, DOT_FP32: tl.constexpr):  # fmt: skip
    """y_row[d] += sum_i w2[e, d, i] h[i] over this i-slice (fp32 atomics), w2 tiles by TMA (columns
    past I arrive as zeros; rows past D, the next expert's, are not added)."""
    row = (expert * D).to(tl.int32)
    i0 = i_start.to(tl.int32)
    if DOT:
        b_cols = split_columns(b_h, d_w2.dtype)
    for d_start in tl.range(0, D, BLOCK_DOUT, num_stages=STAGES):
        b_w = d_w2.load([row + d_start, i0])
        if DOT:
            b_part = tl.sum(
                dot_acc(b_w, b_cols, tl.zeros((BLOCK_DOUT, DOT_N), dtype=tl.float32), DOT_FP32), axis=1
            )
        else:
            b_part = tl.sum(b_w.to(tl.float32) * b_h[None, :], axis=1)
        o_d = d_start + tl.arange(0, BLOCK_DOUT)
        tl.atomic_add(p_y_row + o_d, b_part, mask=o_d < D, sem="relaxed")


@triton.jit
def tma_experts_kernel(
    p_x,
    p_ids,
    p_weights,
    d_w13,
    d_w2,
    p_y,
    stride_xm,
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
    STAGES: tl.constexpr = 4,
    DOT: tl.constexpr = False,
    DOT_FP32: tl.constexpr = False,
    X_DESC: tl.constexpr = False,
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
    """Launch 2 of the fused layer, grid (M * SLOTS, cdiv(I, BLOCK_I)) as deep_experts_kernel (EARLY_SHARED,
    ROUTE_HERE, NORM_EPILOGUE as there). p_x: x, or with X_DESC its descriptor (gate_up_tma); d_w13 /
    d_w2: descriptors of w13 `[S * 2I, D]` and w2 `[S * D, I]` with blocks [BLOCK_I, BLOCK_D] and
    [BLOCK_DOUT, BLOCK_I]."""
    i_ms = tl.program_id(0).to(tl.int64)
    i_blk = tl.program_id(1).to(tl.int64)
    i_m = i_ms // SLOTS
    slot = i_ms % SLOTS
    i_start = i_blk * BLOCK_I
    m_i = i_start + tl.arange(0, BLOCK_I) < INTER
    if X_DESC:
        x_src = p_x
    else:
        x_src = p_x + i_m * stride_xm
    if EARLY_SHARED and slot >= TOP_K:
        expert = slot * 0 + shared_slot
        b_h = gate_up_tma(d_w13, x_src, i_m, expert, i_start, m_i, D, INTER, shared_limit, BLOCK_I, BLOCK_D,
                          STAGES, DOT, DOT_FP32, X_DESC)  # fmt: skip
        pdl_wait(USE_PDL)
        pdl_launch_dependents(USE_PDL)
    else:
        pdl_wait(USE_PDL)
        # After the wait: an earlier trigger lets a chain of kernels cascade (see gemv/kernel.py).
        pdl_launch_dependents(USE_PDL)
        expert, gain = expert_and_gain(
            p_ids, p_weights, p_logits, p_bias, i_m, slot, i_blk, shared_slot, E, scale, TOP_K, ROUTE_HERE,
            N_GROUP, TOPK_GROUP, RENORMALIZE, BLOCK_G, BLOCK_PG, BLOCK_TOPK,
        )  # fmt: skip
        slot_limit = tl.where(slot < TOP_K, limit, shared_limit)
        b_h = gate_up_tma(d_w13, x_src, i_m, expert, i_start, m_i, D, INTER, slot_limit, BLOCK_I, BLOCK_D,
                          STAGES, DOT, DOT_FP32, X_DESC)  # fmt: skip
        b_h = b_h * gain
    down_tma(d_w2, p_y + i_m * D, b_h, expert, i_start, D, BLOCK_I, BLOCK_DOUT, STAGES, DOT, DOT_FP32)
    if NORM_EPILOGUE:
        programs = tl.num_programs(0) * tl.num_programs(1)
        last_program_add_rmsnorm(
            p_y, p_res, p_norm_w, p_normed, p_norm_counter, programs, tl.num_programs(0) // SLOTS, D, eps,
            NORM_CHUNK, NORM_CHUNKS,
        )  # fmt: skip
