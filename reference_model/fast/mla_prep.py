"""MLA decode prologue in ONE launch: rotate the query rope dims and write this token's latent cache row.

Between the fused projection GEMV and the attention kernel, absorbed MLA needs: RoPE on each head's
q_pe, RMSNorm of the latent c, RoPE on k_pe, and the row [normed c ; rotated k_pe] stored at this
token's position. As PyTorch ops that is ~20 tiny kernels per MLA layer (casts, pair split, four
multiplies, stack, cat, index_copy); here it is one launch with grid (H + 1,): programs 0..H-1
rotate one head's q_pe each, program H builds and stores the cache row at the position it reads on
the device (no host index, so it lives in the CUDA graph). Values are rounded to the activation
dtype where the reference rounds them (projection outputs, normed latent), so bf16 results track
the plain PyTorch model.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from bubblescope.kernels._pdl import launch_options, pdl_launch_dependents, pdl_wait, resolve_pdl

from bubblescope.errors import BubblescopeError


class MLAPrepInputError(BubblescopeError):
    """The MLA prologue was given tensors of the wrong shape, dtype or device."""


@triton.jit
def rotate_pairs(p_src, o_p, m_p, b_cos, b_sin, ACT_DTYPE: tl.constexpr):
    """(even', odd') of the interleaved pairs at p_src, inputs rounded to the activation dtype first."""
    b_even = tl.load(p_src + 2 * o_p, mask=m_p, other=0.0).to(ACT_DTYPE).to(tl.float32)
    b_odd = tl.load(p_src + 2 * o_p + 1, mask=m_p, other=0.0).to(ACT_DTYPE).to(tl.float32)
    return b_even * b_cos - b_odd * b_sin, b_odd * b_cos + b_even * b_sin


@triton.jit
def mla_prep_kernel(
    p_q,
    stride_q_head,
    p_latent,
    p_norm_w,
    p_cos,
    p_sin,
    p_pos,
    p_cache,
    stride_cache_row,
    p_q_pe,
    H,
    NOPE,
    LATENT,
    HALF,
    eps,
    BLOCK_C: tl.constexpr,
    BLOCK_P: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    """Grid (H + 1,): program h < H writes q_pe[h]; program H writes cache[pos] = [norm(c) ; rope(k_pe)]."""
    i_h = tl.program_id(0).to(tl.int64)
    o_p = tl.arange(0, BLOCK_P)
    m_p = o_p < HALF
    o_c = tl.arange(0, BLOCK_C)
    m_c = o_c < LATENT
    act_dtype = p_cache.dtype.element_ty
    # The norm weight does not depend on the previous kernel: load it before waiting.
    b_w = tl.load(p_norm_w + o_c, mask=m_c, other=0.0).to(tl.float32)
    pdl_wait(USE_PDL)
    # Trigger after the wait (the kernels' convention): dependents never cascade past this kernel.
    pdl_launch_dependents(USE_PDL)
    b_cos = tl.load(p_cos + o_p, mask=m_p, other=1.0)
    b_sin = tl.load(p_sin + o_p, mask=m_p, other=0.0)
    if i_h < H:
        b_even, b_odd = rotate_pairs(p_q + i_h * stride_q_head + NOPE, o_p, m_p, b_cos, b_sin, act_dtype)
        p_out = p_q_pe + i_h * 2 * HALF + 2 * o_p
        tl.store(p_out, b_even.to(p_q_pe.dtype.element_ty), mask=m_p)
        tl.store(p_out + 1, b_odd.to(p_q_pe.dtype.element_ty), mask=m_p)
    else:
        i_pos = tl.load(p_pos).to(tl.int64)
        p_row = p_cache + i_pos * stride_cache_row
        b_c = tl.load(p_latent + o_c, mask=m_c, other=0.0).to(act_dtype).to(tl.float32)
        b_rstd = 1.0 / tl.sqrt(tl.sum(b_c * b_c, axis=0) / LATENT + eps)
        # RMSNorm as the reference module: normalise in fp32, round, then multiply by the weight.
        b_normed = (b_c * b_rstd).to(act_dtype).to(tl.float32) * b_w
        tl.store(p_row + o_c, b_normed.to(act_dtype), mask=m_c)
        b_even, b_odd = rotate_pairs(p_latent + LATENT, o_p, m_p, b_cos, b_sin, act_dtype)
        tl.store(p_row + LATENT + 2 * o_p, b_even.to(act_dtype), mask=m_p)
        tl.store(p_row + LATENT + 2 * o_p + 1, b_odd.to(act_dtype), mask=m_p)


def mla_prep(
    q: torch.Tensor,
    latent: torch.Tensor,
    norm_weight: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: torch.Tensor,
    cache: torch.Tensor,
    eps: float,
    use_pdl: bool = False,
) -> torch.Tensor:
    """Rotated q_pe for every head, and the latent row of this token written into the cache.

    Args:
        q: `[H, nope + rope]` queries (a row view of the projection output is fine: last dim contiguous).
        latent: `[r + rope]` kv_a output of this token [c ; k_pe] (contiguous; fp32 or the activation dtype).
        norm_weight: `[r]` kv_a_layernorm weight.
        cos, sin: `[1, rope/2]` fp32 factors of this position.
        positions: `[1]` int64 on the device: the cache row to write.
        cache: `[1, capacity, r + rope]` latent cache (activation dtype), written in place.
        eps: RMSNorm epsilon.
        use_pdl: Programmatic Dependent Launch where supported.

    Returns:
        q_pe `[1, H, rope]` in the cache's dtype, contiguous (the MLA decode kernel's input).
    """
    heads, width = q.shape if q.dim() == 2 else (0, 0)
    rope = cos.shape[-1] * 2
    latent_dim = norm_weight.shape[0]
    ok = (
        q.dim() == 2
        and q.stride(1) == 1
        and width > rope
        and latent.dim() == 1
        and latent.is_contiguous()
        and latent.shape[0] == latent_dim + rope
        and cache.dim() == 3
        and cache.shape[0] == 1
        and cache.shape[2] == latent_dim + rope
        and cache.stride(2) == 1
        and positions.dtype == torch.int64
        and cos.is_contiguous()
        and sin.is_contiguous()
        and cos.dtype == torch.float32
    )
    if not ok:
        raise MLAPrepInputError(
            f"mla_prep: need q [H, nope+rope] (unit last stride), latent [r+rope], cache [1, S, r+rope], "
            f"int64 positions and fp32 cos/sin [1, rope/2]; got q {list(q.shape)}, "
            f"latent {list(latent.shape)}, cache {list(cache.shape)}, cos {list(cos.shape)}"
        )
    q_pe = torch.empty(1, heads, rope, dtype=cache.dtype, device=cache.device)
    pdl = resolve_pdl(use_pdl, cache.device)
    mla_prep_kernel[(heads + 1,)](
        q,
        q.stride(0),
        latent,
        norm_weight,
        cos,
        sin,
        positions,
        cache,
        cache.stride(1),
        q_pe,
        heads,
        width - rope,
        latent_dim,
        rope // 2,
        eps,
        BLOCK_C=triton.next_power_of_2(latent_dim),
        BLOCK_P=max(2, triton.next_power_of_2(rope // 2)),
        USE_PDL=pdl,
        num_warps=4,
        **launch_options(pdl),
    )
    return q_pe


def mla_prep_reference(
    q: torch.Tensor,
    latent: torch.Tensor,
    norm_weight: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: torch.Tensor,
    cache: torch.Tensor,
    eps: float,
) -> torch.Tensor:
    """The same in plain PyTorch (the modules' math: RMSNorm, InterleavedRope), for tests."""
    dtype = cache.dtype
    rope = cos.shape[-1] * 2
    latent_dim = norm_weight.shape[0]

    def rotate(values: torch.Tensor) -> torch.Tensor:
        pairs = values.to(dtype).float().unflatten(-1, (-1, 2))
        even, odd = pairs[..., 0], pairs[..., 1]
        return torch.stack((even * cos[0] - odd * sin[0], odd * cos[0] + even * sin[0]), dim=-1).flatten(-2)

    c = latent[:latent_dim].to(dtype).float()
    normed = (c * torch.rsqrt(c.pow(2).mean() + eps)).to(dtype) * norm_weight
    row = torch.cat((normed.to(dtype), rotate(latent[latent_dim:]).to(dtype)))
    cache[0, int(positions[0])] = row
    return rotate(q[:, q.shape[1] - rope :]).to(dtype).unsqueeze(0)
