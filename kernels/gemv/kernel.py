"""Triton GEMV for decode: y[M, N] = x[M, K] @ W[N, K]^T with M = 1..16, fp32 accumulation.

Batch-1 decode is bound by reading W once from HBM, so the work is split over N only ("wide-N"
tiling: many narrow row strips, each program streaming its strip over the whole K). Narrow N (the
512-row router) uses strips of 1-4 rows instead of split-K, so no second launch or atomics are needed.

For M = 1 the product is accumulated elementwise into a [BLOCK_N, BLOCK_K] fp32 block and reduced
over K once at the end (ACC_2D): a per-tile reduction puts warp shuffles and a shared-memory
barrier in every iteration, which stalls the weight stream. Measured on the H200 (graph, 4096x2560,
8 x 512 strips): 9.97 us per-tile, 7.76 us ACC_2D.

PDL trigger placement (PDL_TRIGGER): 0 = `gdc_launch_dependents` before `gdc_wait` (the original
choice), 1 = right after `gdc_wait` (default), 2 = after the main loop. With 0 a kernel lets its
dependent launch before it has waited itself, so a chain of kernels can cascade: several grids
resident at once, each prefetching a weight tile and holding SM slots at `gdc_wait`, all competing
with the one grid that can make progress; 1 keeps at most one grid waiting ahead. Measured (same
torch 2.11 / triton 3.6): the per-tile kernel went from PDL 11.13 us vs 9.91 plain (trigger 0) to
9.28 vs 9.97 (trigger 1). The ACC_2D kernel shows no difference (6.88 vs 6.87 us under PDL), which
fits the explanation: at 120 registers only ~4 of its programs fit per SM, about one grid's worth,
so no second grid can become resident anyway. Trigger 2 was slower (7.36 us).

L2 prefetch (PREFETCH, `GemvConfig.l2_prefetch`): before `gdc_wait` each program may also ask L2 for
its whole strip (prefetch.py), so a projection that fits in L2 streams while the previous kernel's
latency-bound tail still runs; no registers, the same products.
"""

from __future__ import annotations

import triton
import triton.language as tl
from bubblescope.kernels._pdl import pdl_launch_dependents, pdl_wait
from bubblescope.kernels.gemv.prefetch import prefetch_strip_l2


@triton.jit
def load_weight_tile(p_w, o_n, m_n, k_start, K, stride_wn, BLOCK_K: tl.constexpr, EVICT_FIRST: tl.constexpr):
    """W[o_n, k_start : k_start + BLOCK_K] as a [BLOCK_N, BLOCK_K] block, zero past N and K.
    EVICT_FIRST marks the streamed weights first out of L2 (read once per step; keep x and y there)."""
    o_k = k_start + tl.arange(0, BLOCK_K)
    m_w = m_n[:, None] & (o_k < K)[None, :]
    p_tile = p_w + o_n[:, None] * stride_wn + o_k[None, :]
    if EVICT_FIRST:
        b_w = tl.load(p_tile, mask=m_w, other=0.0, eviction_policy="evict_first")
    else:
        b_w = tl.load(p_tile, mask=m_w, other=0.0)
    return b_w


@triton.jit
def accumulate_tile(
    acc,
    p_x,
    b_w,
    k_start,
    M,
    K,
    stride_xm,
    BLOCK_M: tl.constexpr,
    BLOCK_K: tl.constexpr,
    DOT_FP32: tl.constexpr,
):
    """acc[BLOCK_M, BLOCK_N] += x[:, k-tile] @ b_w^T; M == 1 reduces on CUDA cores, M > 1 uses tl.dot
    (in the weight dtype on tensor cores; DOT_FP32 upcasts, because the CPU interpreter's bf16 dot
    returns garbage in triton 3.9)."""
    o_m = tl.arange(0, BLOCK_M)
    o_k = k_start + tl.arange(0, BLOCK_K)
    m_x = (o_m < M)[:, None] & (o_k < K)[None, :]
    b_x = tl.load(p_x + o_m[:, None] * stride_xm + o_k[None, :], mask=m_x, other=0.0)
    if BLOCK_M == 1:
        # [1, BLOCK_K] * [BLOCK_N, BLOCK_K] -> row sums; exact fp32, no tensor-core rounding of x.
        prod = b_w.to(tl.float32) * b_x.to(tl.float32)
        acc += tl.sum(prod, axis=1)[None, :]
    else:
        if DOT_FP32:
            acc += tl.dot(
                b_x.to(b_w.dtype).to(tl.float32), tl.trans(b_w.to(tl.float32)), input_precision="ieee"
            )
        else:
            acc += tl.dot(b_x.to(b_w.dtype), tl.trans(b_w), input_precision="ieee")
    return acc


@triton.jit
def row_strip_2d(
    p_x,
    p_w,
    o_n,
    m_n,
    b_w,
    K,
    stride_wn,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVICT_FIRST: tl.constexpr,
):
    """M == 1: [1, BLOCK_N] fp32 dot products of x with rows o_n, starting from the loaded tile b_w;
    elementwise fp32 accumulation, one reduction over K at the end."""
    b_acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for k_start in range(0, K, BLOCK_K):
        b_w_next = load_weight_tile(p_w, o_n, m_n, k_start + BLOCK_K, K, stride_wn, BLOCK_K, EVICT_FIRST)
        o_k = k_start + tl.arange(0, BLOCK_K)
        b_x = tl.load(p_x + o_k, mask=o_k < K, other=0.0).to(tl.float32)
        b_acc += b_w.to(tl.float32) * b_x[None, :]
        b_w = b_w_next
    return tl.sum(b_acc, axis=1)[None, :]


@triton.jit
def row_strip_2d_pairs(
    p_x,
    p_w,
    o_n,
    m_n,
    b_w0,
    b_w1,
    K,
    stride_wn,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVICT_FIRST: tl.constexpr,
):
    """row_strip_2d with two tiles in flight (PAIRS): tiles consumed in pairs (b_w0, b_w1: the first
    two, loaded before the wait) while the next pair loads, as the experts' `deep_experts` does. A
    program with one tile ahead waits one memory round trip per tile; this, one per two tiles."""
    b_acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for k_start in range(0, K, 2 * BLOCK_K):
        b_n0 = load_weight_tile(p_w, o_n, m_n, k_start + 2 * BLOCK_K, K, stride_wn, BLOCK_K, EVICT_FIRST)
        b_n1 = load_weight_tile(p_w, o_n, m_n, k_start + 3 * BLOCK_K, K, stride_wn, BLOCK_K, EVICT_FIRST)
        o_k = k_start + tl.arange(0, BLOCK_K)
        b_x0 = tl.load(p_x + o_k, mask=o_k < K, other=0.0).to(tl.float32)
        b_x1 = tl.load(p_x + BLOCK_K + o_k, mask=o_k + BLOCK_K < K, other=0.0).to(tl.float32)
        b_acc += b_w0.to(tl.float32) * b_x0[None, :]
        b_acc += b_w1.to(tl.float32) * b_x1[None, :]
        b_w0 = b_n0
        b_w1 = b_n1
    return tl.sum(b_acc, axis=1)[None, :]


@triton.jit
def gemv_strip(
    p_x,
    p_w,
    i_n,
    M,
    N,
    K,
    stride_xm,
    stride_wn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    USE_PDL: tl.constexpr,
    DOT_FP32: tl.constexpr,
    ACC_2D: tl.constexpr = False,
    EVICT_FIRST: tl.constexpr = False,
    PDL_TRIGGER: tl.constexpr = 1,
    PREFETCH: tl.constexpr = 0,
    PREFETCH_LINES: tl.constexpr = 1,
    PAIRS: tl.constexpr = False,
):
    """One [BLOCK_M, BLOCK_N] output strip in fp32. Under PDL the first weight tile is loaded before
    `gdc_wait` (weights never depend on the previous kernel; x does); PDL_TRIGGER places the
    dependents' launch (module docstring); PREFETCH != 0 also asks L2 for the whole strip before the
    wait (prefetch.py: PREFETCH is its MODE, PREFETCH_LINES its LINES); PAIRS (one row, ACC_2D) keeps
    two tiles in flight, the first two loaded before the wait (row_strip_2d_pairs)."""
    o_n = i_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_n = o_n < N
    b_w = load_weight_tile(p_w, o_n, m_n, 0, K, stride_wn, BLOCK_K, EVICT_FIRST)
    pairs: tl.constexpr = PAIRS and BLOCK_M == 1 and ACC_2D
    if pairs:
        b_w1 = load_weight_tile(p_w, o_n, m_n, BLOCK_K, K, stride_wn, BLOCK_K, EVICT_FIRST)
    prefetch_strip_l2(p_w, i_n * BLOCK_N, N, K, stride_wn, BLOCK_N, PREFETCH_LINES, PREFETCH)
    if PDL_TRIGGER == 0:
        pdl_launch_dependents(USE_PDL)
    pdl_wait(USE_PDL)
    if PDL_TRIGGER == 1:
        pdl_launch_dependents(USE_PDL)
    if pairs:
        acc = row_strip_2d_pairs(p_x, p_w, o_n, m_n, b_w, b_w1, K, stride_wn, BLOCK_N, BLOCK_K, EVICT_FIRST)
    elif BLOCK_M == 1 and ACC_2D:
        acc = row_strip_2d(p_x, p_w, o_n, m_n, b_w, K, stride_wn, BLOCK_N, BLOCK_K, EVICT_FIRST)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k_start in range(0, K, BLOCK_K):
            # Prefetch the next weight tile before using this one (all-masked past K: no traffic).
            b_w_next = load_weight_tile(p_w, o_n, m_n, k_start + BLOCK_K, K, stride_wn, BLOCK_K, EVICT_FIRST)
            acc = accumulate_tile(acc, p_x, b_w, k_start, M, K, stride_xm, BLOCK_M, BLOCK_K, DOT_FP32)
            b_w = b_w_next
    if PDL_TRIGGER == 2:
        pdl_launch_dependents(USE_PDL)
    return acc


@triton.jit
def gemv_kernel(
    p_x,
    p_w,
    p_y,
    M,
    N,
    K,
    stride_xm,
    stride_wn,
    stride_ym,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    USE_PDL: tl.constexpr,
    DOT_FP32: tl.constexpr,
    ACC_2D: tl.constexpr = False,
    EVICT_FIRST: tl.constexpr = False,
    PDL_TRIGGER: tl.constexpr = 1,
    PREFETCH: tl.constexpr = 0,
    PREFETCH_LINES: tl.constexpr = 1,
    PAIRS: tl.constexpr = False,
):
    """Grid (cdiv(N, BLOCK_N),): program i_n writes y[:, i_n*BLOCK_N : (i_n+1)*BLOCK_N]."""
    i_n = tl.program_id(0).to(tl.int64)
    acc = gemv_strip(
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
        USE_PDL,
        DOT_FP32,
        ACC_2D,
        EVICT_FIRST,
        PDL_TRIGGER,
        PREFETCH,
        PREFETCH_LINES,
        PAIRS,
    )
    o_m = tl.arange(0, BLOCK_M)
    o_n = i_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_y = (o_m < M)[:, None] & (o_n < N)[None, :]
    tl.store(p_y + o_m[:, None] * stride_ym + o_n[None, :], acc.to(p_y.dtype.element_ty), mask=m_y)
