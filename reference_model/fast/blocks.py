"""One decode token through each kind of block, with the Triton kernels (batch 1, static shapes).

Every function takes the packed weights, the normed hidden `[1, D]` and the step options, and
returns the block's output `[1, D]` without touching any host value, so the whole step can be
captured in one CUDA graph. RoPE and the latent-cache write are one Triton launch (mla_prep.py);
the absorbed-MLA head products and the head gate are PyTorch ops (each one small kernel inside the
graph), or two Triton launches under `fused_mla_glue`; the two dense layers' SwiGLU stays in PyTorch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import triton
from bubblescope.kernels._pdl import is_interpreting
from bubblescope.kernels.gemv import GemvConfig
from bubblescope.kernels.gemv import gemv as gemv_kernel
from bubblescope.kernels.gemv.head_norm_prologue import gemv_head_norm
from bubblescope.kernels.gemv.norm_epilogue import gemv_add_rmsnorm
from bubblescope.kernels.kda_decode import kda_decode
from bubblescope.kernels.kda_decode.heads import kda_decode_heads
from bubblescope.kernels.mla_decode import mla_decode
from bubblescope.kernels.mla_glue import mla_out_gate, mla_q_absorb
from bubblescope.kernels.moe import (
    FusedMoEConfig,
    MoEWeights,
    MoEWorkspace,
    RoutingRule,
    moe_fused,
    moe_unfused,
)
from bubblescope.kernels.moe.launch import tma_fits
from bubblescope.kernels.rmsnorm import NormEpilogue, add_rmsnorm

from ..ffn import swiglu
from .metadata import DecodeMetadata
from .mla_prep import mla_prep
from .packing import DensePack, KDAPack, MLAPack, MoEPack


def interpreter_gemv_config(out_features: int, in_features: int) -> GemvConfig | None:
    """Tiles for the CPU interpreter, None (the kernel's own heuristic) on a GPU.

    The interpreter's cost is per program, not per byte, so on the CPU a few wide programs replace
    the GPU's many narrow strips (same fp32 accumulation; only the summation order differs).
    """
    if not is_interpreting():
        return None
    return GemvConfig(
        block_n=min(256, triton.next_power_of_2(out_features)),
        block_k=min(1024, triton.next_power_of_2(in_features)),
    )


def gemv(
    x: torch.Tensor, weight: torch.Tensor, *, use_pdl: bool, out_dtype: torch.dtype | None = None
) -> torch.Tensor:
    """The decode GEMV `[1, K] @ [N, K]^T` with the interpreter's tiles on the CPU."""
    config = interpreter_gemv_config(weight.shape[0], weight.shape[1])
    return gemv_kernel(x, weight, out_dtype=out_dtype, use_pdl=use_pdl, config=config)


def output_projection(
    x: torch.Tensor, weight: torch.Tensor, opts: StepOptions, norm: NormEpilogue | None
) -> torch.Tensor:
    """A block's last GEMV `[1, K] -> [1, D]`; with `norm` (the `norm_epilogue` switch) its launch also
    does the residual add + RMSNorm that follows, and the normed row `norm.out` is returned instead."""
    if norm is None:
        return gemv(x, weight, use_pdl=opts.use_pdl)
    config = interpreter_gemv_config(weight.shape[0], weight.shape[1])
    return gemv_add_rmsnorm(x, weight, norm, use_pdl=opts.use_pdl, config=config)


@dataclass(frozen=True)
class StepOptions:
    """What the kernel-level switches choose (applied by construction of the step).

    Attributes:
        use_pdl: launch every Triton kernel with Programmatic Dependent Launch (`pdl`).
        fused_moe: MoE in 2 launches (`moe_fused`) instead of 4 (`moe_unfused`).
        bf16_gate: router GEMV on the bf16 copy of the router weight.
        bf16_lm_head: lm_head GEMV on the bf16 copy of lm_head.
        eps: RMSNorm epsilon of the model.
        mla_scale: softmax scale 1/sqrt(nope + rope).
        kda_v_splits: programs per KDA head in the decode kernel (1 = one program per head; more
            spread the 64 KB fp32 state of a head over several SMs: split_kernel.py).
        fast_topk: route with the packed-key top-k (kernels/moe/topk_keys.py), fused or not.
        early_shared: the fused experts launch computes the shared expert's gate/up before waiting
            for routing (no effect with fused_moe off).
        deep_experts: the fused experts launch keeps two weight tiles in flight per program
            (kernels/moe/paired_kernel.py; no effect with fused_moe off).
        routing_in_experts: the fused experts launch's programs route the token themselves from the
            router logits; the router launch has no ticket (kernels/moe/slot_routing.py; no effect
            with fused_moe off).
        tma_experts: the fused experts launch's weight tiles come by TMA copies into shared memory,
            pipelined, and feed tensor-core dots (kernels/moe/tma_kernel.py; no effect with fused_moe
            off, and on weights whose rows are not 16-byte aligned or not whole tiles: launch.tma_fits).
        fused_mla_glue: the MLA head products (W_UK into the query; W_UV and the head gate into the
            output) as two Triton launches (kernels/mla_glue) instead of PyTorch ops.
        norm_epilogue: each block's output launch (KDA o_proj, MLA dense, dense FFN down, the fused
            MoE experts) ends with the residual add + RMSNorm of the next block, in its last program
            (kernels/rmsnorm/epilogue.py), instead of a separate add_rmsnorm launch.
        kda_norm_in_oproj: KDA decode leaves its gated head RMSNorm to o_proj's GEMV, which norms each
            head's V-chunk as it loads x (kernels/kda_decode/heads.py, kernels/gemv/head_norm_prologue.py).
    """

    use_pdl: bool
    fused_moe: bool
    bf16_gate: bool
    bf16_lm_head: bool
    eps: float
    mla_scale: float
    kda_v_splits: int = 1
    fast_topk: bool = False
    early_shared: bool = False
    deep_experts: bool = False
    routing_in_experts: bool = False
    tma_experts: bool = False
    fused_mla_glue: bool = False
    norm_epilogue: bool = False
    kda_norm_in_oproj: bool = False


# Every block below takes `norm`: None returns the block's output `[1, D]` (the caller norms it); a
# NormEpilogue (`norm_epilogue`) makes the block's last launch add it into the residual and norm it,
# and the block returns the normed row.


def tma_config(config: FusedMoEConfig, weights: MoEWeights) -> FusedMoEConfig:
    """`config` with the TMA experts launch where it fits (launch.tma_fits), its tiles no larger than
    the layer (the measured e256 tiles unchanged; the small presets get whole tiles too)."""
    hidden, inter = weights.w2.shape[1], weights.w2.shape[2]
    tiles = replace(
        config,
        tma_experts=True,
        block_d=min(config.block_d, hidden),
        block_dout=min(config.block_dout, hidden),
        tma_block_i=min(config.tma_block_i, inter),
    )
    return tiles if tma_fits(weights, tiles) else config


def kda_block(
    pack: KDAPack, normed: torch.Tensor, opts: StepOptions, norm: NormEpilogue | None = None
) -> torch.Tensor:
    """KDA attention for one token: fused projection GEMV, one-launch KDA decode, o_proj GEMV."""
    # [1, 5W + H]: q, k, v, f, g, b as column slices (the kernel takes row strides).
    proj = gemv(normed, pack.in_proj, use_pdl=opts.use_pdl)
    q, k, v, f, g, b = proj.split(pack.widths, dim=1)
    if opts.kda_norm_in_oproj:
        return _kda_norm_in_oproj(pack, (q, k, v, f, b, g), opts, norm)
    out = kda_decode(
        q,
        k,
        v,
        f,
        b,
        g,
        pack.weights,
        pack.state,
        eps=opts.eps,
        use_pdl=opts.use_pdl,
        v_splits=opts.kda_v_splits,
    )
    return output_projection(out, pack.o_proj, opts, norm)


def _kda_norm_in_oproj(
    pack: KDAPack, projections: tuple[torch.Tensor, ...], opts: StepOptions, norm: NormEpilogue | None
) -> torch.Tensor:
    """kda_block's tail under `kda_norm_in_oproj`: gated, un-normed heads, then o_proj scaling each head
    by its rstd as it loads x."""
    gate = projections[-1]
    heads = kda_decode_heads(
        *projections, pack.weights, pack.state, eps=opts.eps, use_pdl=opts.use_pdl, v_splits=opts.kda_v_splits
    )
    config = interpreter_gemv_config(*pack.o_proj.shape)
    return gemv_head_norm(
        heads.out,
        heads.sumsq,
        pack.o_proj,
        out_dtype=gate.dtype,
        eps=opts.eps,
        use_pdl=opts.use_pdl,
        config=config,
        epilogue=norm,
    )


def _mla_queries(pack: MLAPack, proj: torch.Tensor, heads: int, opts: StepOptions) -> torch.Tensor:
    """q `[H, nope + rope]`: rows of the fp32 projection, or the q LoRA output when the model has one."""
    q_first = proj[0, : pack.q_rows]
    if pack.q_b_proj is None:
        return q_first.view(heads, -1)
    dtype = pack.cache.dtype
    q_a, _ = add_rmsnorm(q_first.to(dtype).view(1, -1), None, pack.q_a_norm, opts.eps, use_pdl=opts.use_pdl)
    return gemv(q_a, pack.q_b_proj, use_pdl=opts.use_pdl).view(heads, -1)


def mla_block(
    pack: MLAPack,
    normed: torch.Tensor,
    meta: DecodeMetadata,
    opts: StepOptions,
    norm: NormEpilogue | None = None,
) -> torch.Tensor:
    """Absorbed MLA for one token: write its latent row at `meta.positions`, attend over seq_lens rows."""
    # [1, Q + r + R + H] in fp32: the head gate must be an fp32 GEMV of the bf16 inputs (notes §3.2).
    proj = gemv(normed, pack.in_proj, out_dtype=torch.float32, use_pdl=opts.use_pdl)
    q = _mla_queries(pack, proj, pack.w_uk.shape[0], opts)
    start = pack.q_rows
    latent_width = pack.cache.shape[2]
    latent = proj[0, start : start + latent_width]
    gate_logits = proj[:, start + latent_width :]
    if opts.fused_mla_glue:
        return _mla_fused_glue(pack, q, latent, gate_logits, meta, opts, norm)
    dtype = normed.dtype
    heads, nope, latent_dim = pack.w_uk.shape
    gate = torch.sigmoid(gate_logits)
    # One launch: rope on q_pe, and [RMSNorm(c) ; rope(k_pe)] stored at this position's cache row.
    q_pe = mla_prep(
        q, latent, pack.kv_a_norm, meta.cos, meta.sin, meta.positions, pack.cache, opts.eps, opts.use_pdl
    )
    # [H, 1, nope] @ [H, nope, r] -> [1, H, r] (W_UK folded into the query)
    q_latent = torch.bmm(q[:, None, :nope].to(dtype), pack.w_uk).view(1, heads, latent_dim)
    o_latent = mla_decode(q_latent, q_pe, pack.cache, meta.seq_lens, opts.mla_scale, use_pdl=opts.use_pdl)
    # [H, 1, r] @ [H, r, v] -> [1, H, v] (W_UV folded into the output)
    heads_out = torch.bmm(o_latent.view(heads, 1, latent_dim), pack.w_uv_t).view(1, heads, -1)
    gated = (heads_out.float() * gate[..., None]).to(dtype).view(1, -1)
    return output_projection(gated, pack.dense, opts, norm)


def _mla_fused_glue(
    pack: MLAPack,
    q: torch.Tensor,
    latent: torch.Tensor,
    gate_logits: torch.Tensor,
    meta: DecodeMetadata,
    opts: StepOptions,
    norm: NormEpilogue | None,
) -> torch.Tensor:
    """mla_block's tail under `fused_mla_glue`: the same math, the head products in two launches."""
    q_pe = mla_prep(
        q, latent, pack.kv_a_norm, meta.cos, meta.sin, meta.positions, pack.cache, opts.eps, opts.use_pdl
    )
    # [1, H, r]: q_nope rounded to the cache dtype, times W_UK per head.
    q_latent = mla_q_absorb(q, pack.w_uk, use_pdl=opts.use_pdl)
    o_latent = mla_decode(q_latent, q_pe, pack.cache, meta.seq_lens, opts.mla_scale, use_pdl=opts.use_pdl)
    # [1, H*v]: per head round(round(o_latent @ W_UV^T) * sigmoid(gate)), the dense layer's input.
    gated = mla_out_gate(o_latent, pack.w_uv_t, gate_logits, use_pdl=opts.use_pdl)
    return output_projection(gated, pack.dense, opts, norm)


def dense_block(
    pack: DensePack, normed: torch.Tensor, opts: StepOptions, norm: NormEpilogue | None = None
) -> torch.Tensor:
    """Dense SwiGLU FFN: fused gate/up GEMV, SwiGLU (with the layer's clamp), down GEMV."""
    gate, up = gemv(normed, pack.w13, use_pdl=opts.use_pdl).chunk(2, dim=1)
    return output_projection(swiglu(gate, up, pack.limit).contiguous(), pack.w2, opts, norm)


def moe_block(
    pack: MoEPack,
    normed: torch.Tensor,
    rule: RoutingRule,
    workspace: MoEWorkspace,
    opts: StepOptions,
    norm: NormEpilogue | None = None,
) -> torch.Tensor:
    """Routed + shared experts of one token; `fused_moe` picks 2 launches over 4. Output fp32 `[1, D]`
    (with `norm`: the normed row, the last launch having added the output into the residual)."""
    weights = pack.with_router(opts.bf16_gate)
    if not opts.fused_moe:
        out = moe_unfused(
            normed,
            weights,
            rule,
            use_pdl=opts.use_pdl,
            workspace=workspace,
            fast_topk=opts.fast_topk,
            epilogue=norm,
        )
        return out if norm is None else norm.out
    # Interpreter: one router program instead of one per expert row (cost is per program there).
    router_block_n = triton.next_power_of_2(weights.router.shape[0]) if is_interpreting() else 1
    config = FusedMoEConfig(
        router_block_n=router_block_n,
        fast_topk=opts.fast_topk,
        early_shared=opts.early_shared,
        deep_experts=opts.deep_experts,
        routing_site="experts" if opts.routing_in_experts else "router_launch",
    )
    if opts.tma_experts:
        config = tma_config(config, weights)
    out = moe_fused(
        normed, weights, rule, use_pdl=opts.use_pdl, workspace=workspace, config=config, epilogue=norm
    )
    return out if norm is None else norm.out
