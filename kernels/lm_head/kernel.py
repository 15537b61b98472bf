"""Triton lm_head GEMV + greedy argmax on device, two stages (no logits round trip to the host).

Stage 1 (a persistent grid of a few programs per SM, each walking a run of vocab strips): the GEMV
strips, optionally stored as fp32 logits, reduced to one (max, first index of max) per row and
program. Why: the first version ran one program per strip of 64 rows x 512 columns, i.e. two
64x512 tiles (512 fp32 values per thread) in flight: register spills, 5 ms in fp32 against a
0.4 ms byte floor, and a 2456-wide combine. Stage 2 (grid over rows): the max over programs; ties
go to the lowest index (inside a strip tl.argmax returns the lowest index, across strips of one
program only a larger value wins), matching torch.argmax.
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
    NUM_PARTS,
    STRIPS_PER_PROGRAM,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    WRITE_LOGITS: tl.constexpr,
    USE_PDL: tl.constexpr,
    DOT_FP32: tl.constexpr,
    ACC_2D: tl.constexpr,
    EVICT_FIRST: tl.constexpr,
):
    """Grid (NUM_PARTS,): program p walks strips p*S .. p*S + S-1 (S = STRIPS_PER_PROGRAM) and keeps, per
    row, the running max logit and its first index; strips are visited in increasing order and only a
    strictly larger value replaces the best, so ties keep the lowest index."""
    i_p = tl.program_id(0).to(tl.int64)
    o_m = tl.arange(0, BLOCK_M)
    m_m = o_m < M
    # Only x depends on the previous kernel; every strip reads it after this single wait.
    pdl_wait(USE_PDL)
    pdl_launch_dependents(USE_PDL)
    b_best_val = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    b_best_idx = tl.zeros((BLOCK_M,), dtype=tl.int64) + i_p * STRIPS_PER_PROGRAM * BLOCK_N
    for i_s in range(0, STRIPS_PER_PROGRAM):
        i_n = i_p * STRIPS_PER_PROGRAM + i_s
        b_acc = gemv_strip(
            p_x,
            p_w,
            i_n,
            M,
            N,
            K,
            stride_xm,
            stride_wn,
            BLOCK_M,
            BLOCK_N,
            BLOCK_K,
            False,
            DOT_FP32,
            ACC_2D,
            EVICT_FIRST,
            1,
        )
        o_n = i_n * BLOCK_N + tl.arange(0, BLOCK_N)
        m_n = o_n < N
        if WRITE_LOGITS:
            tl.store(p_logits + o_m[:, None] * N + o_n[None, :], b_acc, mask=m_m[:, None] & m_n[None, :])
        b_acc = tl.where(m_n[None, :], b_acc, float("-inf"))
        b_val = tl.max(b_acc, axis=1)
        b_idx = tl.argmax(b_acc, axis=1).to(tl.int64) + i_n * BLOCK_N
        b_better = b_val > b_best_val
        b_best_idx = tl.where(b_better, b_idx, b_best_idx)
        b_best_val = tl.where(b_better, b_val, b_best_val)
    tl.store(p_part_val + o_m * NUM_PARTS + i_p, b_best_val, mask=m_m)
    tl.store(p_part_idx + o_m * NUM_PARTS + i_p, b_best_idx, mask=m_m)


@triton.jit
def argmax_combine_kernel(
    p_part_val, p_part_idx, p_tokens, NUM_STRIPS, BLOCK_S: tl.constexpr, USE_PDL: tl.constexpr
):
    """Grid (M,): token[m] = index of the largest partial maximum, lowest index on ties."""
    i_m = tl.program_id(0).to(tl.int64)
    pdl_wait(USE_PDL)
    pdl_launch_dependents(USE_PDL)
    o_s = tl.arange(0, BLOCK_S)
    m_s = o_s < NUM_STRIPS
    b_val = tl.load(p_part_val + i_m * NUM_STRIPS + o_s, mask=m_s, other=float("-inf"))
    b_idx = tl.load(p_part_idx + i_m * NUM_STRIPS + o_s, mask=m_s, other=0)
    b_best = tl.max(b_val, axis=0)
    big = 0x7FFFFFFFFFFFFFFF
    b_token = tl.min(tl.where(m_s & (b_val == b_best), b_idx, big), axis=0)
    tl.store(p_tokens + i_m, b_token)
