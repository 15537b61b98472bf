"""KDA's o_proj GEMV with the heads' gated RMSNorm in its prologue (`kda_norm_in_oproj`).

y = normed(x) @ W^T for one row, where x is KDA's un-normed output `[H*V]` (fp32) and, per head h
(columns h*V .. h*V+V-1), normed(x) = x * rstd_h * o_norm * sigmoid(gate), rstd_h = 1 / sqrt(sum_h / V
+ eps), rounded to the gate's dtype exactly as `kda_decode` stores its normed output. Why here: the norm
reduces over V, which the V-split KDA kernel could only do across its programs (workspace, ticket, the
last program's read); kernels/kda_decode/heads.py instead stores each V slice's sum of squares, so the
norm is elementwise in this kernel: every program adds a head's P slice sums (P loads of one address,
L1-broadcast) for each x element it loads. No reduction and no layout change in the weight loop; the
extra reads are x in fp32 (16 KB instead of 8 KB), the gate row and o_norm, all from L2.

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
    p_x, p_sumsq, p_gate, p_o_norm, k_start, K, V, eps, PARTS: tl.constexpr, BLOCK_K: tl.constexpr
):
    """normed(x)[k_start : k_start + BLOCK_K] in fp32 (module docstring), zero past K."""
    o_k = k_start + tl.arange(0, BLOCK_K)
    m_k = o_k < K
    o_head = o_k // V
    b_sq = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for i_p in tl.static_range(PARTS):
        b_sq += tl.load(p_sumsq + o_head * PARTS + i_p, mask=m_k, other=0.0)
    b_rstd = 1.0 / tl.sqrt(b_sq / V + eps)
    b_o = tl.load(p_x + o_k, mask=m_k, other=0.0)
    b_gate = tl.load(p_gate + o_k, mask=m_k, other=0.0).to(tl.float32)
    b_o_norm = tl.load(p_o_norm + o_k % V, mask=m_k, other=0.0).to(tl.float32)
    b_x = b_o * b_rstd * b_o_norm * tl.sigmoid(b_gate)
    # kda_decode rounds its normed output to the activations' dtype before o_proj reads it.
    return b_x.to(p_gate.dtype.element_ty).to(tl.float32)


@triton.jit
def gemv_head_norm_kernel(
    p_x,
    p_sumsq,
    p_gate,
    p_o_norm,
    p_w,
    p_y,
    p_res,
    p_norm_w,
    p_norm_out,
    p_counter,
    N,
    K,
    V,
    stride_wn,
    eps,
    norm_eps,
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
        b_x = load_normed_x_tile(p_x, p_sumsq, p_gate, p_o_norm, k_start, K, V, eps, PARTS, BLOCK_K)
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


def check_head_norm_inputs(
    x: torch.Tensor, sumsq: torch.Tensor, gate: torch.Tensor, o_norm: torch.Tensor, weight: torch.Tensor
) -> None:
    """Raise KernelInputError unless the shapes, dtypes, layouts and device fit one row of H heads of V."""
    if x.dim() != 2 or x.shape[0] != 1 or weight.dim() != 2 or x.shape[1] != weight.shape[1]:
        raise KernelInputError(
            f"{OP}: x must be [1, K] and weight [N, K]; got {list(x.shape)} and {list(weight.shape)}"
        )
    width, value_dim = x.shape[1], o_norm.numel()
    if o_norm.dim() != 1 or value_dim == 0 or width % value_dim:
        raise KernelInputError(
            f"{OP}: o_norm must be [V] with V dividing K={width}; got {list(o_norm.shape)}"
        )
    heads = width // value_dim
    if sumsq.dim() != 3 or tuple(sumsq.shape[:2]) != (1, heads) or sumsq.shape[2] < 1:
        raise KernelInputError(f"{OP}: sumsq must be [1, {heads}, P]; got {list(sumsq.shape)}")
    if tuple(gate.shape) != (1, width):
        raise KernelInputError(f"{OP}: gate must be [1, {width}]; got {list(gate.shape)}")
    for name, tensor in (("x", x), ("sumsq", sumsq)):
        if tensor.dtype != torch.float32 or not tensor.is_contiguous():
            raise KernelInputError(f"{OP}: {name} must be contiguous fp32 (kda_decode_heads' output)")
    check_dtype("gate", gate, FLOAT_DTYPES, OP)
    check_dtype("o_norm", o_norm, FLOAT_DTYPES, OP)
    check_dtype("weight", weight, FLOAT_DTYPES, OP)
    if gate.stride(1) != 1 or weight.stride(1) != 1 or not o_norm.is_contiguous():
        raise KernelInputError(f"{OP}: gate, weight and o_norm need a contiguous last dimension")
    check_same_device(OP, x=x, sumsq=sumsq, gate=gate, o_norm=o_norm, weight=weight)


def gemv_head_norm(
    x: torch.Tensor,
    sumsq: torch.Tensor,
    gate: torch.Tensor,
    o_norm: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    use_pdl: bool = False,
    config: GemvConfig | None = None,
    out: torch.Tensor | None = None,
    epilogue: NormEpilogue | None = None,
) -> torch.Tensor:
    """KDA's o_proj with its heads' gated RMSNorm in the prologue: y = headnorm(x) @ weight^T, one row.

    Args:
        x: `[1, H*V]` fp32 un-normed head rows (`KDAHeads.out`).
        sumsq: `[1, H, P]` fp32 sums of squares of each head's P V-slices (`KDAHeads.sumsq`).
        gate: `[1, H*V]` g_proj output (its dtype is the normed row's rounding and y's default dtype).
        o_norm: `[V]` gated-RMSNorm weight shared by all heads.
        weight: `[N, H*V]` o_proj weight.
        eps: the head RMSNorm's epsilon.
        use_pdl: Programmatic Dependent Launch where supported.
        config: strips (block_n, block_k, num_warps, evict_first, pdl_trigger, l2_prefetch); default
            `choose_config(1, N, K)`, the plain GEMV's. acc_2d is implied.
        out: optional `[1, N]` destination, gate's dtype (contiguous with an epilogue).
        epilogue: the next block's residual add + RMSNorm in the last program (`norm_epilogue`).
    Returns:
        `[1, N]` y, or `epilogue.out` (the normed next-block input) with an epilogue.
    """
    check_head_norm_inputs(x, sumsq, gate, o_norm, weight)
    out_features, width = weight.shape
    if out is None:
        out = torch.empty(1, out_features, dtype=gate.dtype, device=x.device)
    elif tuple(out.shape) != (1, out_features) or out.dtype != gate.dtype or not out.is_contiguous():
        raise KernelInputError(f"{OP}: out must be a contiguous [1, {out_features}] {gate.dtype} tensor")
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
        gate,
        o_norm,
        weight,
        out,
        res,
        norm_w,
        norm_out,
        counter,
        out_features,
        width,
        o_norm.numel(),
        weight.stride(0),
        eps,
        norm_eps,
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
