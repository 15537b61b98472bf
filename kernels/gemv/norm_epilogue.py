"""The decode GEMV with the next block's residual add + RMSNorm in its epilogue (`norm_epilogue`).

y = x @ W^T as `gemv_kernel` computes it (same strips, same fp32 accumulation, y stored in its dtype),
then the launch's last program by ticket adds y into the residual and writes the normed row
(kernels/rmsnorm/epilogue.py: why, the PDL reasoning, the roundings). Used where a block's output
projection feeds a norm: the KDA o_proj, the MLA dense and the dense FFN's down GEMV (all D rows).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from bubblescope.kernels._pdl import is_interpreting, launch_options, resolve_pdl
from bubblescope.kernels.gemv.checks import KernelInputError
from bubblescope.kernels.gemv.kernel import gemv_strip
from bubblescope.kernels.gemv.ops import (
    GemvConfig,
    check_config,
    check_gemv_inputs,
    choose_config,
    prefetch_constants,
    rows_block,
)
from bubblescope.kernels.rmsnorm.epilogue import NormEpilogue, check_norm_epilogue, last_program_add_rmsnorm


@triton.jit
def gemv_norm_epilogue_kernel(
    p_x,
    p_w,
    p_y,
    p_res,
    p_norm_w,
    p_out,
    p_counter,
    M,
    N,
    K,
    stride_xm,
    stride_wn,
    eps,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    NORM_CHUNK: tl.constexpr,
    NORM_CHUNKS: tl.constexpr,
    USE_PDL: tl.constexpr,
    DOT_FP32: tl.constexpr,
    ACC_2D: tl.constexpr = False,
    EVICT_FIRST: tl.constexpr = False,
    PDL_TRIGGER: tl.constexpr = 1,
    PREFETCH: tl.constexpr = 0,
    PREFETCH_LINES: tl.constexpr = 1,
    PAIRS: tl.constexpr = False,
):
    """Grid (cdiv(N, BLOCK_N),): program i_n writes y[:, its strip]; the last one norms every row.
    y is `[M, N]` contiguous (row stride N), as the epilogue reads it."""
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
    tl.store(p_y + o_m[:, None] * N + o_n[None, :], acc.to(p_y.dtype.element_ty), mask=m_y)
    last_program_add_rmsnorm(
        p_y, p_res, p_norm_w, p_out, p_counter, tl.num_programs(0), M, N, eps, NORM_CHUNK, NORM_CHUNKS
    )


def gemv_add_rmsnorm(
    x: torch.Tensor,
    weight: torch.Tensor,
    epilogue: NormEpilogue,
    use_pdl: bool = False,
    config: GemvConfig | None = None,
    y: torch.Tensor | None = None,
) -> torch.Tensor:
    """y = x @ weight^T (in x's dtype), then residual += y and out = RMSNorm(residual), in one launch.

    Args:
        x: activations `[M, K]`, M in 1..16.
        weight: `[N, K]` (N = the hidden size D the norm runs over).
        epilogue: residual `[M, N]` (updated in place), norm weight `[N]`, out `[M, N]`, counter, eps.
        use_pdl: Programmatic Dependent Launch where supported.
        config: tiles; default `choose_config(M, N, K)` (the plain GEMV's).
        y: optional `[M, N]` contiguous scratch for the projection (default: allocated).
    Returns:
        `epilogue.out`, the normed rows.
    """
    op = "gemv_add_rmsnorm"
    check_gemv_inputs(x, weight, op=op)
    rows, out_features = x.shape[0], weight.shape[0]
    check_norm_epilogue(epilogue, rows, out_features, x.device, op)
    if y is None:
        y = torch.empty(rows, out_features, dtype=x.dtype, device=x.device)
    elif tuple(y.shape) != (rows, out_features) or y.dtype != x.dtype or not y.is_contiguous():
        raise KernelInputError(f"{op}: y must be a contiguous [{rows}, {out_features}] {x.dtype} tensor")
    config = config or choose_config(rows, out_features, x.shape[1])
    check_config(config, rows)
    pdl = resolve_pdl(use_pdl, x.device)
    chunk, chunks = epilogue.chunks()
    gemv_norm_epilogue_kernel[(triton.cdiv(out_features, config.block_n),)](
        x,
        weight,
        y,
        epilogue.residual,
        epilogue.weight,
        epilogue.out,
        epilogue.counter,
        rows,
        out_features,
        x.shape[1],
        x.stride(0),
        weight.stride(0),
        epilogue.eps,
        BLOCK_M=rows_block(rows),
        BLOCK_N=config.block_n,
        BLOCK_K=config.block_k,
        NORM_CHUNK=chunk,
        NORM_CHUNKS=chunks,
        USE_PDL=pdl,
        DOT_FP32=is_interpreting(),
        ACC_2D=config.acc_2d,
        EVICT_FIRST=config.evict_first,
        PDL_TRIGGER=config.pdl_trigger,
        **prefetch_constants(config),
        PAIRS=config.pairs,
        num_warps=config.num_warps,
        **launch_options(pdl),
    )
    return epilogue.out
