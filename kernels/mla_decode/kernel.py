"""Triton absorbed-MLA decode: flash-decoding split over the context, then a combine.

All H query heads share one 576-wide key per token (MQA shape after absorption), so one program
handles every head of its context slice and reads each cache row once. The context is split into
NUM_SPLITS slices (fixed at launch from the cache capacity, so CUDA graphs can be captured once;
the actual length is read on device) to put enough SMs on long contexts; a second tiny kernel
merges the slices with their log-sum-exps.
"""

from __future__ import annotations

import triton
import triton.language as tl
from bubblescope.kernels._pdl import pdl_launch_dependents, pdl_wait

LOG2E = 1.4426950408889634


@triton.jit
def scores_block(b_q_lat, b_q_pe, b_c, b_pe, DOT_FP32: tl.constexpr):
    """[BLOCK_H, BLOCK_S] raw scores q_lat . c + q_pe . pe (fp32 dot in the CPU interpreter)."""
    if DOT_FP32:
        b_scores = tl.dot(b_q_lat.to(tl.float32), tl.trans(b_c.to(tl.float32)), input_precision="ieee")
        b_scores += tl.dot(b_q_pe.to(tl.float32), tl.trans(b_pe.to(tl.float32)), input_precision="ieee")
    else:
        b_scores = tl.dot(b_q_lat.to(b_c.dtype), tl.trans(b_c))
        b_scores += tl.dot(b_q_pe.to(b_pe.dtype), tl.trans(b_pe))
    return b_scores


@triton.jit
def mla_split_kernel(
    p_q_lat,
    p_q_pe,
    p_cache,
    p_seq_lens,
    p_o_part,
    p_lse_part,
    H,
    C,
    R,
    S_MAX,
    stride_qlb,
    stride_qlh,
    stride_qpb,
    stride_qph,
    stride_cb,
    stride_cs,
    scale_log2,
    NUM_SPLITS: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_C: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK_S: tl.constexpr,
    USE_PDL: tl.constexpr,
    DOT_FP32: tl.constexpr,
):
    """Grid (B, NUM_SPLITS): partial softmax-weighted latent sums of one context slice, all heads.

    Writes o_part[b, split, h, :] (normalised within the slice) and lse_part[b, split, h] (log2
    domain; -inf for an empty slice).
    """
    i_b = tl.program_id(0).to(tl.int64)
    i_split = tl.program_id(1).to(tl.int64)
    # Queries, lengths and the newest cache row come from earlier kernels of this step.
    pdl_wait(USE_PDL)
    # After the wait: an earlier trigger lets a chain of kernels cascade (see gemv/kernel.py).
    pdl_launch_dependents(USE_PDL)
    o_h = tl.arange(0, BLOCK_H)
    o_c = tl.arange(0, BLOCK_C)
    o_r = tl.arange(0, BLOCK_R)
    m_h = o_h < H
    b_q_lat = tl.load(
        p_q_lat + i_b * stride_qlb + o_h[:, None] * stride_qlh + o_c[None, :],
        mask=m_h[:, None] & (o_c < C)[None, :],
        other=0.0,
    )
    b_q_pe = tl.load(
        p_q_pe + i_b * stride_qpb + o_h[:, None] * stride_qph + o_r[None, :],
        mask=m_h[:, None] & (o_r < R)[None, :],
        other=0.0,
    )
    seq_len = tl.minimum(tl.load(p_seq_lens + i_b).to(tl.int64), S_MAX)
    # Slices are whole BLOCK_S multiples so every loop block holds at least one valid row.
    slice_len = tl.cdiv(tl.cdiv(seq_len, NUM_SPLITS), BLOCK_S) * BLOCK_S
    start = i_split * slice_len
    end = tl.minimum(start + slice_len, seq_len)
    b_max = tl.full((BLOCK_H,), float("-inf"), dtype=tl.float32)
    b_sum = tl.zeros((BLOCK_H,), dtype=tl.float32)
    b_acc = tl.zeros((BLOCK_H, BLOCK_C), dtype=tl.float32)
    for s_start in range(start, end, BLOCK_S):
        o_s = s_start + tl.arange(0, BLOCK_S)
        m_s = o_s < end
        p_rows = p_cache + i_b * stride_cb + o_s[:, None] * stride_cs
        b_c = tl.load(p_rows + o_c[None, :], mask=m_s[:, None] & (o_c < C)[None, :], other=0.0)
        b_pe = tl.load(p_rows + C + o_r[None, :], mask=m_s[:, None] & (o_r < R)[None, :], other=0.0)
        b_scores = scores_block(b_q_lat, b_q_pe, b_c, b_pe, DOT_FP32) * scale_log2
        b_scores = tl.where(m_s[None, :], b_scores, float("-inf"))
        b_max_new = tl.maximum(b_max, tl.max(b_scores, axis=1))
        b_alpha = tl.exp2(b_max - b_max_new)
        b_p = tl.exp2(b_scores - b_max_new[:, None])
        b_sum = b_sum * b_alpha + tl.sum(b_p, axis=1)
        if DOT_FP32:
            b_pv = tl.dot(b_p, b_c.to(tl.float32), input_precision="ieee")
        else:
            b_pv = tl.dot(b_p.to(b_c.dtype), b_c)
        b_acc = b_acc * b_alpha[:, None] + b_pv
        b_max = b_max_new
    b_has = b_sum > 0
    b_out = b_acc / tl.where(b_has, b_sum, 1.0)[:, None]
    b_lse = tl.where(b_has, b_max + tl.log2(tl.where(b_has, b_sum, 1.0)), float("-inf"))
    o_part_row = (i_b * NUM_SPLITS + i_split) * H + o_h
    tl.store(p_o_part + o_part_row[:, None] * C + o_c[None, :], b_out, mask=m_h[:, None] & (o_c < C)[None, :])
    tl.store(p_lse_part + o_part_row, b_lse, mask=m_h)


@triton.jit
def mla_combine_kernel(
    p_o_part,
    p_lse_part,
    p_out,
    H,
    C,
    stride_ob,
    stride_oh,
    NUM_SPLITS: tl.constexpr,
    BLOCK_SPLITS: tl.constexpr,
    BLOCK_C: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    """Grid (B, H): out[b, h] = sum_i 2^(lse_i - max) o_i / sum_i 2^(lse_i - max); zeros if all empty."""
    i_b = tl.program_id(0).to(tl.int64)
    i_h = tl.program_id(1).to(tl.int64)
    pdl_wait(USE_PDL)
    # After the wait: an earlier trigger lets a chain of kernels cascade (see gemv/kernel.py).
    pdl_launch_dependents(USE_PDL)
    o_i = tl.arange(0, BLOCK_SPLITS)
    o_c = tl.arange(0, BLOCK_C)
    m_i = o_i < NUM_SPLITS
    o_rows = (i_b * NUM_SPLITS + o_i) * H + i_h
    b_lse = tl.load(p_lse_part + o_rows, mask=m_i, other=float("-inf"))
    b_max = tl.max(b_lse, axis=0)
    b_max = tl.where(b_max > float("-inf"), b_max, 0.0)
    b_w = tl.exp2(b_lse - b_max)
    b_o = tl.load(
        p_o_part + o_rows[:, None] * C + o_c[None, :], mask=m_i[:, None] & (o_c < C)[None, :], other=0.0
    )
    b_total = tl.sum(b_w, axis=0)
    b_out = tl.sum(b_o * b_w[:, None], axis=0) / tl.where(b_total > 0, b_total, 1.0)
    tl.store(p_out + i_b * stride_ob + i_h * stride_oh + o_c, b_out.to(p_out.dtype.element_ty), mask=o_c < C)
