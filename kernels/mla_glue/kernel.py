"""Triton kernels for the absorbed-MLA head products around the attention kernel (decode, one token).

Absorbed MLA folds W_UK into the query and W_UV into the output: per head h,
`q_latent[h] = q_nope[h] @ W_UK[h]` (`[nope] @ [nope, r]`) before the attention, and
`gated[h] = (o_latent[h] @ W_UV^T[h]) * sigmoid(gate[h])` (`[r] @ [r, v]`) after it. As PyTorch ops
that is a cast, two bmm, a sigmoid, a multiply and two casts per layer, each its own launch; here it
is one launch before the attention and one after. Both are per-head GEMVs bound by reading the
weights (4 MB each at Ling's 32 x 128 x 512 bf16), so every program loads its whole weight tile
BEFORE `pdl_wait` (weights never depend on the previous kernel) and only then the activations.

Numerics follow the PyTorch ops they replace: the query is rounded to the weight dtype before the
product (`q.to(dtype)`), products accumulate in fp32 and round to the weight dtype (a bmm's output);
the output product is rounded to the weight dtype BEFORE the fp32 gate multiply, then rounded again.
The gate's sigmoid is `1 / (1 + exp(-x))` with libdevice's accurate `expf` and an IEEE division
(PRECISE_SIGMOID), the formula PyTorch's CUDA sigmoid uses; Triton's `tl.sigmoid` takes the
approximate `ex2` path and can differ in the last bit. The interpreter has no libdevice: plain exp.

The CPU interpreter (triton 3.9) truncates fp32 -> bf16 casts where a GPU rounds to nearest even, so
under MANUAL_RNE the roundings go through `round_to`'s integer round-to-nearest-even: CPU tests then
see the GPU's (and PyTorch's) bf16 values.
"""

from __future__ import annotations

import triton
import triton.language as tl
from bubblescope.kernels._pdl import pdl_launch_dependents, pdl_wait
from triton.language.extra import libdevice


@triton.jit
def sigmoid_like_torch(b_x, PRECISE_SIGMOID: tl.constexpr):
    """fp32 1 / (1 + exp(-x)): libdevice expf + IEEE division on a GPU, numpy's exp in the interpreter."""
    if PRECISE_SIGMOID:
        b_exp = libdevice.exp(-b_x)
    else:
        b_exp = tl.exp(-b_x)
    return tl.math.div_rn(1.0, 1.0 + b_exp)


@triton.jit
def round_to(b_x, DTYPE: tl.constexpr, MANUAL_RNE: tl.constexpr):
    """fp32 -> DTYPE rounded to nearest even; MANUAL_RNE does it on the bits for bf16 (interpreter)."""
    # Nested constexpr ifs: the compiler drops the untaken branches.
    if MANUAL_RNE:
        if DTYPE == tl.bfloat16:
            # Add half an ulp of bf16 (minus one on an even last kept bit: ties go to even), drop 16
            # bits; int32 addition is the same bit pattern as unsigned for every finite value.
            b_bits = b_x.to(tl.int32, bitcast=True)
            b_bits = b_bits + 0x7FFF + ((b_bits >> 16) & 1)
            return ((b_bits >> 16) << 16).to(tl.float32, bitcast=True).to(DTYPE)
    return b_x.to(DTYPE)


@triton.jit
def mla_q_absorb_kernel(
    p_q,
    p_w,
    p_out,
    NOPE,
    R,
    stride_qh,
    stride_wh,
    stride_wn,
    stride_oh,
    BLOCK_N: tl.constexpr,
    BLOCK_R: tl.constexpr,
    USE_PDL: tl.constexpr,
    MANUAL_RNE: tl.constexpr,
):
    """Grid (H, cdiv(R, BLOCK_R)): out[h, r-slice] = round(q[h, :NOPE] rounded) @ W_UK[h, :, r-slice].

    W_UK rows are contiguous along r, so a program reads a `[BLOCK_N >= NOPE, BLOCK_R]` tile of
    coalesced rows and reduces over its first axis (no loop: NOPE fits one block, checked by ops.py).
    """
    i_h = tl.program_id(0).to(tl.int64)
    i_r = tl.program_id(1).to(tl.int64)
    o_n = tl.arange(0, BLOCK_N)
    o_r = i_r * BLOCK_R + tl.arange(0, BLOCK_R)
    m_n = o_n < NOPE
    m_r = o_r < R
    # [BLOCK_N, BLOCK_R] of W_UK[h]: independent of the previous kernel, so loaded before the wait.
    b_w = tl.load(
        p_w + i_h * stride_wh + o_n[:, None] * stride_wn + o_r[None, :],
        mask=m_n[:, None] & m_r[None, :],
        other=0.0,
    )
    pdl_wait(USE_PDL)
    # After the wait (the kernels' convention): dependents never cascade past this kernel.
    pdl_launch_dependents(USE_PDL)
    w_dtype = p_w.dtype.element_ty
    # q.to(dtype) before the product, as the PyTorch path casts the fp32 projection rows.
    b_q = tl.load(p_q + i_h * stride_qh + o_n, mask=m_n, other=0.0).to(tl.float32)
    b_q = round_to(b_q, w_dtype, MANUAL_RNE)
    b_acc = tl.sum(b_q.to(tl.float32)[:, None] * b_w.to(tl.float32), axis=0)
    tl.store(p_out + i_h * stride_oh + o_r, round_to(b_acc, p_out.dtype.element_ty, MANUAL_RNE), mask=m_r)


@triton.jit
def mla_out_gate_kernel(
    p_o,
    p_w,
    p_gate,
    p_out,
    R,
    V,
    stride_oh,
    stride_wh,
    stride_wr,
    stride_wv,
    BLOCK_V: tl.constexpr,
    BLOCK_R: tl.constexpr,
    USE_PDL: tl.constexpr,
    PRECISE_SIGMOID: tl.constexpr,
    MANUAL_RNE: tl.constexpr,
):
    """Grid (H, cdiv(V, BLOCK_V)): out[h*V + vs] = round(round(o[h] @ W_UV^T[h][:, vs]) * sigmoid(gate[h])).

    W_UV^T[h] is `[R, V]` as a transposed view whose r is contiguous (stride_wr == 1 in the model),
    so the tile is loaded as `[BLOCK_V, BLOCK_R]` rows along r and reduced over its second axis.
    """
    i_h = tl.program_id(0).to(tl.int64)
    i_v = tl.program_id(1).to(tl.int64)
    o_v = i_v * BLOCK_V + tl.arange(0, BLOCK_V)
    o_r = tl.arange(0, BLOCK_R)
    m_v = o_v < V
    m_r = o_r < R
    # [BLOCK_V, BLOCK_R] of W_UV[h] (= W_UV^T[h] transposed): loaded before the wait.
    b_w = tl.load(
        p_w + i_h * stride_wh + o_v[:, None] * stride_wv + o_r[None, :] * stride_wr,
        mask=m_v[:, None] & m_r[None, :],
        other=0.0,
    )
    pdl_wait(USE_PDL)
    pdl_launch_dependents(USE_PDL)
    w_dtype = p_w.dtype.element_ty
    b_o = tl.load(p_o + i_h * stride_oh + o_r, mask=m_r, other=0.0).to(tl.float32)
    # The bmm's output is in the weight dtype: round the product before the gate multiply.
    b_heads = round_to(tl.sum(b_o[None, :] * b_w.to(tl.float32), axis=1), w_dtype, MANUAL_RNE)
    b_gate = sigmoid_like_torch(tl.load(p_gate + i_h).to(tl.float32), PRECISE_SIGMOID)
    b_gated = round_to(b_heads.to(tl.float32) * b_gate, p_out.dtype.element_ty, MANUAL_RNE)
    tl.store(p_out + i_h * V + o_v, b_gated, mask=m_v)
