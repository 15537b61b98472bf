"""Triton lm_head GEMV + greedy argmax on device, two stages (no logits round trip to the host).

Stage 1 (grid over vocab strips): the GEMV strip, optionally stored as fp32 logits, reduced to
one (max, first index of max) per row and strip. Stage 2 (grid over rows): the max over strips;
ties go to the lowest strip, and inside a strip tl.argmax already returns the lowest index, so
the result is the lowest index overall, matching torch.argmax.
"""

from __future__ import annotations

import triton
import triton.language as tl
from bubblescope.kernels._pdl import pdl_launch_dependents, pdl_wait
from bubblescope.kernels.gemv.kernel import gemv_strip


@triton.jit
def lm_head_partial_kernel(
    p_x,
    p_w,
    p_logits,
    p_part_val,
    p_part_idx,
    M,
    N,
    K,
    stride_xm,
    stride_wn,
    NUM_STRIPS,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    WRITE_LOGITS: tl.constexpr,
    USE_PDL: tl.constexpr,
    DOT_FP32: tl.constexpr,
):
    """Grid (cdiv(N, BLOCK_N),): per row, this strip's max logit and its first index."""
    i_n = tl.program_id(0).to(tl.int64)
    b_acc = gemv_strip(
        p_x, p_w, i_n, M, N, K, stride_xm, stride_wn, BLOCK_M, BLOCK_N, BLOCK_K, USE_PDL, DOT_FP32
    )
    o_m = tl.arange(0, BLOCK_M)
    o_n = i_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_m = o_m < M
    if WRITE_LOGITS:
        tl.store(p_logits + o_m[:, None] * N + o_n[None, :], b_acc, mask=m_m[:, None] & (o_n < N)[None, :])
    b_acc = tl.where((o_n < N)[None, :], b_acc, float("-inf"))
    b_val = tl.max(b_acc, axis=1)
    b_idx = tl.argmax(b_acc, axis=1).to(tl.int64) + i_n * BLOCK_N
    tl.store(p_part_val + o_m * NUM_STRIPS + i_n, b_val, mask=m_m)
    tl.store(p_part_idx + o_m * NUM_STRIPS + i_n, b_idx, mask=m_m)


@triton.jit
def argmax_combine_kernel(
    p_part_val, p_part_idx, p_tokens, NUM_STRIPS, BLOCK_S: tl.constexpr, USE_PDL: tl.constexpr
):
    """Grid (M,): token[m] = index of the largest strip maximum, lowest index on ties."""
    i_m = tl.program_id(0).to(tl.int64)
    pdl_launch_dependents(USE_PDL)
    pdl_wait(USE_PDL)
    o_s = tl.arange(0, BLOCK_S)
    m_s = o_s < NUM_STRIPS
    b_val = tl.load(p_part_val + i_m * NUM_STRIPS + o_s, mask=m_s, other=float("-inf"))
    b_idx = tl.load(p_part_idx + i_m * NUM_STRIPS + o_s, mask=m_s, other=0)
    b_best = tl.max(b_val, axis=0)
    big = 0x7FFFFFFFFFFFFFFF
    b_token = tl.min(tl.where(m_s & (b_val == b_best), b_idx, big), axis=0)
    tl.store(p_tokens + i_m, b_token)
