"""KDA's o_proj GEMV with the heads' RMS scaling in its prologue (`kda_norm_in_oproj`).

y = normed(x) @ W^T for one row, where x is KDA's gated, un-normed output `[H*V]` (fp32, o * o_norm *
sigmoid(gate), kernels/kda_decode/heads.py) and, per head h (columns h*V .. h*V+V-1), normed(x) = x *
rstd_h, rstd_h = rsqrt(sum_h / V + eps), rounded to y's dtype as `kda_decode` rounds its normed output.
Why here: the norm reduces over V, which the V-split KDA kernel could only do across its programs
(workspace, ticket, the last program's read); KDA stores each V slice's sum of squares instead, so the
rstd is elementwise here: every program adds a head's P slice sums (P loads of one address, L1-broadcast)
for each x element it loads. Every program of the launch redoes this for the whole row (and warps that
share columns redo it again), so it must stay a handful of instructions per element: V is a constexpr
(the head index is a shift), rsqrt is the hardware approximation, and the elementwise gate and o_norm
product is KDA's (first design, gate and o_norm here with an IEEE sqrt and divide: o_proj 7.98 -> 16.49
us on the H200, RESULTS.md issue 27 round 4).

Same strips as `gemv_kernel` with ACC_2D (one row, elementwise fp32 accumulation, one reduction over K at
the end; kernel.py says why), the first weight tile loaded before `gdc_wait`, PDL_TRIGGER and the L2
prefetch of the strip (`GemvConfig.l2_prefetch`, a benchmark arm) as there.
With an epilogue (`norm_epilogue` on as well) the launch's last program also does the next block's
residual add + RMSNorm (kernels/rmsnorm/epilogue.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from bubblescope.kernels._pdl import launch_options, pdl_launch_dependents, pdl_wait, resolve_pdl
from bubblescope.kernels.gemv.checks import FLOAT_DTYPES, KernelInputError, check_dtype, check_same_device
from bubblescope.kernels.gemv.kernel import load_weight_tile
from bubblescope.kernels.gemv.ops import GemvConfig, check_config, choose_config, prefetch_constants
from bubblescope.kernels.gemv.prefetch import prefetch_strip_l2
from bubblescope.kernels.rmsnorm.epilogue import NormEpilogue, check_norm_epilogue, last_program_add_rmsnorm

OP = "gemv_head_norm"


@triton.jit
def load_normed_x_tile(
    p_x,
    p_sumsq,
    k_start,
    K,
    eps,
    HEAD_DIM: tl.constexpr,
    PARTS: tl.constexpr,
    BLOCK_K: tl.constexpr,
    ROUND_TO: tl.constexpr,
):
    """normed(x)[k_start : k_start + BLOCK_K] in fp32 (module docstring), zero past K."""
    o_k = k_start + tl.arange(0, BLOCK_K)
    m_k = o_k < K
    o_head = o_k // HEAD_DIM
    b_sq = tl.load(p_sumsq + o_head * PARTS, mask=m_k, other=0.0)
    for i_p in tl.static_range(1, PARTS):
        b_sq += tl.load(p_sumsq + o_head * PARTS + i_p, mask=m_k, other=0.0)
    b_x = tl.load(p_x + o_k, mask=m_k, other=0.0) * tl.rsqrt(b_sq * (1.0 / HEAD_DIM) + eps)
    # kda_decode rounds its normed output to the activations' dtype before o_proj reads it.
    return b_x.to(ROUND_TO).to(tl.float32)


@triton.jit
def gemv_head_norm_kernel(
    p_x,
    p_sumsq,
    p_w,
    p_y,
    p_res,
    p_norm_w,
    p_norm_out,
    p_counter,
    N,
    K,
    stride_wn,
    eps,
    norm_eps,
    HEAD_DIM: tl.constexpr,
    PARTS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    USE_PDL: tl.constexpr,
    EVICT_FIRST: tl.constexpr,
    PDL_TRIGGER: tl.constexpr,
    USE_EPILOGUE: tl.constexpr,
    NORM_CHUNK: tl.constexpr,
    NORM_CHUNKS: tl.constexpr,
    PREFETCH: tl.constexpr = 0,
    PREFETCH_LINES: tl.constexpr = 1,
):
    """Grid (cdiv(N, BLOCK_N),): program i_n writes y[0, i_n*BLOCK_N : (i_n+1)*BLOCK_N]."""
    i_n = tl.program_id(0).to(tl.int64)
    o_n = i_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_n = o_n < N
    b_w = load_weight_tile(p_w, o_n, m_n, 0, K, stride_wn, BLOCK_K, EVICT_FIRST)
    prefetch_strip_l2(p_w, i_n * BLOCK_N, N, K, stride_wn, BLOCK_N, PREFETCH_LINES, PREFETCH)
    if PDL_TRIGGER == 0:
        pdl_launch_dependents(USE_PDL)
    pdl_wait(USE_PDL)
    if PDL_TRIGGER == 1:
        pdl_launch_dependents(USE_PDL)
    b_acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for k_start in range(0, K, BLOCK_K):
        b_w_next = load_weight_tile(p_w, o_n, m_n, k_start + BLOCK_K, K, stride_wn, BLOCK_K, EVICT_FIRST)
        b_x = load_normed_x_tile(
            p_x, p_sumsq, k_start, K, eps, HEAD_DIM, PARTS, BLOCK_K, p_y.dtype.element_ty
        )
        b_acc += b_w.to(tl.float32) * b_x[None, :]
        b_w = b_w_next
    if PDL_TRIGGER == 2:
        pdl_launch_dependents(USE_PDL)
    b_y = tl.sum(b_acc, axis=1)
    tl.store(p_y + o_n, b_y.to(p_y.dtype.element_ty), mask=m_n)
    if USE_EPILOGUE:
        last_program_add_rmsnorm(
            p_y,
            p_res,
            p_norm_w,
            p_norm_out,
            p_counter,
            tl.num_programs(0),
            1,
            N,
            norm_eps,
            NORM_CHUNK,
            NORM_CHUNKS,
        )


def check_head_norm_inputs(x: torch.Tensor, sumsq: torch.Tensor, weight: torch.Tensor) -> None:
    """Raise KernelInputError unless the shapes, dtypes, layouts and device fit one row of H heads."""
    if x.dim() != 2 or x.shape[0] != 1 or weight.dim() != 2 or x.shape[1] != weight.shape[1]:
        raise KernelInputError(
            f"{OP}: x must be [1, K] and weight [N, K]; got {list(x.shape)} and {list(weight.shape)}"
        )
    width = x.shape[1]
    if sumsq.dim() != 3 or sumsq.shape[0] != 1 or min(sumsq.shape[1:]) < 1 or width % sumsq.shape[1]:
        raise KernelInputError(
            f"{OP}: sumsq must be [1, H, P] with H dividing K={width}; got {list(sumsq.shape)}"
        )
    for name, tensor in (("x", x), ("sumsq", sumsq)):
        if tensor.dtype != torch.float32 or not tensor.is_contiguous():
            raise KernelInputError(f"{OP}: {name} must be contiguous fp32 (kda_decode_heads' output)")
    check_dtype("weight", weight, FLOAT_DTYPES, OP)
    if weight.stride(1) != 1:
        raise KernelInputError(f"{OP}: weight needs a contiguous last dimension")
    check_same_device(OP, x=x, sumsq=sumsq, weight=weight)


def gemv_head_norm(
    x: torch.Tensor,
    sumsq: torch.Tensor,
    weight: torch.Tensor,
    out_dtype: torch.dtype = torch.bfloat16,
    eps: float = 1e-6,
    use_pdl: bool = False,
    config: GemvConfig | None = None,
    out: torch.Tensor | None = None,
    epilogue: NormEpilogue | None = None,
) -> torch.Tensor:
    """KDA's o_proj with its heads' RMS scaling in the prologue: y = (x * rstd_head) @ weight^T, one row.

    Args:
        x: `[1, H*V]` fp32 gated, un-normed head rows (`KDAHeads.out`).
        sumsq: `[1, H, P]` fp32 sums of squares of each head's P V-slices of o (`KDAHeads.sumsq`).
        weight: `[N, H*V]` o_proj weight.
        out_dtype: y's dtype, also the normed row's rounding (KDA's activations' dtype); default bf16.
        eps: the head RMSNorm's epsilon.
        use_pdl: Programmatic Dependent Launch where supported.
        config: strips (block_n, block_k, num_warps, evict_first, pdl_trigger, l2_prefetch); default
            `choose_config(1, N, K)`, the plain GEMV's. acc_2d is implied.
        out: optional contiguous `[1, N]` destination in out_dtype.
        epilogue: the next block's residual add + RMSNorm in the last program (`norm_epilogue`).
    Returns:
        `[1, N]` y, or `epilogue.out` (the normed next-block input) with an epilogue.
    """
    check_head_norm_inputs(x, sumsq, weight)
    out_features, width = weight.shape
    if out is None:
        out = torch.empty(1, out_features, dtype=out_dtype, device=x.device)
    elif tuple(out.shape) != (1, out_features) or out.dtype != out_dtype or not out.is_contiguous():
        raise KernelInputError(f"{OP}: out must be a contiguous [1, {out_features}] {out_dtype} tensor")
    config = config or choose_config(1, out_features, width)
    check_config(config, 1)
    chunk, chunks = (1, 1)
    if epilogue is not None:
        check_norm_epilogue(epilogue, 1, out_features, x.device, OP)
        chunk, chunks = epilogue.chunks()
    pdl = resolve_pdl(use_pdl, x.device)
    # Without an epilogue its pointers are never read (USE_EPILOGUE is False): out stands in.
    res, norm_w, norm_out, counter, norm_eps = (
        (epilogue.residual, epilogue.weight, epilogue.out, epilogue.counter, epilogue.eps)
        if epilogue is not None
        else (out, out, out, out, 0.0)
    )
    gemv_head_norm_kernel[(triton.cdiv(out_features, config.block_n),)](
        x,
        sumsq,
        weight,
        out,
        res,
        norm_w,
        norm_out,
        counter,
        out_features,
        width,
        weight.stride(0),
        eps,
        norm_eps,
        HEAD_DIM=width // sumsq.shape[1],
        PARTS=sumsq.shape[2],
        BLOCK_N=config.block_n,
        BLOCK_K=config.block_k,
        USE_PDL=pdl,
        EVICT_FIRST=config.evict_first,
        PDL_TRIGGER=config.pdl_trigger,
        USE_EPILOGUE=epilogue is not None,
        NORM_CHUNK=chunk,
        NORM_CHUNKS=chunks,
        **prefetch_constants(config),
        num_warps=config.num_warps,
        **launch_options(pdl),
    )
    return out if epilogue is None else epilogue.out
