"""Weight packing for the fast decode step, built ONCE from the model's own parameters.

The kernels want fused layouts: one input projection per attention block (one GEMV instead of 3-6),
gate+up stacked per expert, and the shared expert as one more slot of the routed expert stack
(`MoEWeights.w13` `[E+1, 2I, D]`, `w2` `[E+1, D, I]`). On ling3-flash-e256 the experts are ~120 GB
of a 141 GB card, so a second copy is impossible: each fused tensor is allocated, filled from the
model's parameters, and the model's parameters are then re-pointed (`param.data = view`) into it.
The old storage is freed layer by layer, so the peak overhead is one layer's worth (~3 GB on e256),
and the eager model keeps working on the very same bytes (its `forward` sees views).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from bubblescope.kernels.kda_decode import KDALayerState, KDALayerWeights
from bubblescope.kernels.moe import MoEWeights, RoutingRule
from torch import nn

from bubblescope.errors import ConfigError

from ..cache import ModelCache
from ..config import LingConfig
from ..kda import L2_NORM_EPS, KDAAttention
from ..mla import MLAAttention
from ..model import LingForCausalLM
from ..moe import MoE


@dataclass
class KDAPack:
    """One KDA block: fused in-projection rows [q W | k W | v W | f W | g W | b H] then o_proj.

    Attributes:
        in_proj: `[5W + H, D]` (views of it are the model's q/k/v/f/g/b_proj weights).
        widths: row counts of q, k, v, f, g, b inside in_proj.
        weights: conv / gate / norm tensors the decode kernel reads.
        state: the cache's KDA state as the kernel sees it (views, updated in place).
        o_proj: `[D, W]`.
    """

    in_proj: torch.Tensor
    widths: tuple[int, ...]
    weights: KDALayerWeights
    state: KDALayerState
    o_proj: torch.Tensor


@dataclass
class MLAPack:
    """One MLA block in the absorbed decode form.

    Attributes:
        in_proj: `[Q + r + R + H, D]` rows [q_proj (or q_a_proj) | kv_a_proj_with_mqa | g_proj].
        q_rows: Q, the rows of q_proj (or q_a_proj when q LoRA is on).
        q_a_norm, q_b_proj: q LoRA norm weight `[q_lora_rank]` and `[H*(nope+rope), q_lora_rank]`, or None.
        kv_a_norm: `[r]` latent norm weight.
        w_uk: `[H, nope, r]`, w_uv_t: `[H, r, v]` (views of kv_b_proj).
        dense: `[D, H*v]`.
        cache: `[1, capacity, r + R]` the layer's latent cache buffer.
    """

    in_proj: torch.Tensor
    q_rows: int
    q_a_norm: torch.Tensor | None
    q_b_proj: torch.Tensor | None
    kv_a_norm: torch.Tensor
    w_uk: torch.Tensor
    w_uv_t: torch.Tensor
    dense: torch.Tensor
    cache: torch.Tensor


@dataclass
class DensePack:
    """Dense SwiGLU FFN: w13 `[2I, D]` (gate rows then up rows), w2 `[D, I]`, clamp limit."""

    w13: torch.Tensor
    w2: torch.Tensor
    limit: float


@dataclass
class MoEPack:
    """One MoE block: the kernels' MoEWeights for the fp32 router; bf16 router made on demand."""

    weights: MoEWeights
    router_fp32: torch.Tensor
    router_bf16: torch.Tensor | None = None

    def with_router(self, bf16: bool) -> MoEWeights:
        """MoEWeights whose router is the fp32 master (baseline) or its bf16 copy (`bf16_gate`)."""
        if bf16 and self.router_bf16 is None:
            self.router_bf16 = self.router_fp32.to(torch.bfloat16)
        router = self.router_bf16 if bf16 else self.router_fp32
        w = self.weights
        return MoEWeights(
            router, w.expert_bias, w.w13, w.w2, w.shared_slot, w.swiglu_limit, w.shared_swiglu_limit
        )


@dataclass
class LayerPack:
    """One decoder layer: its two norm weights, attention (KDA or MLA) and FFN (dense or MoE)."""

    index: int
    input_norm: torch.Tensor
    post_attention_norm: torch.Tensor
    attention: KDAPack | MLAPack
    mlp: DensePack | MoEPack


@dataclass
class ModelPack:
    """Everything the fast step reads, packed once per (model, cache)."""

    config: LingConfig
    embed: torch.Tensor
    layers: list[LayerPack]
    final_norm: torch.Tensor
    lm_head_fp32: torch.Tensor
    rule: RoutingRule
    lm_head_bf16: torch.Tensor | None = None

    def lm_head(self, bf16: bool) -> torch.Tensor:
        """lm_head weight `[V, D]`: the model's own (fp32 baseline) or a bf16 copy (`bf16_lm_head`)."""
        if bf16 and self.lm_head_bf16 is None:
            self.lm_head_bf16 = self.lm_head_fp32.to(torch.bfloat16)
        return self.lm_head_bf16 if bf16 else self.lm_head_fp32


# Attribute set on a module once its weights are packed: the fused tensor(s) it now lives in.
PACKED_ATTR = "_bubblescope_packed"


def fuse_rows(owner: nn.Module, weights: list[nn.Parameter]) -> torch.Tensor:
    """Stack `[n_i, D]` parameters into one `[sum n_i, D]` tensor and re-point each parameter at its rows.

    The fused tensor is remembered on `owner`, so packing the same module twice returns it again.
    """
    packed = getattr(owner, PACKED_ATTR, None)
    if packed is not None:
        return packed
    fused = torch.cat([w.data for w in weights], dim=0)
    start = 0
    for weight in weights:
        weight.data = fused[start : start + weight.shape[0]]
        start += weight.shape[0]
    setattr(owner, PACKED_ATTR, fused)
    return fused


def _free_cached(device: torch.device) -> None:
    # The replaced storages go back to the caching allocator; hand them to the driver so the next
    # layer's (larger) fused tensor can be placed even when the card is nearly full.
    if device.type == "cuda":
        torch.cuda.empty_cache()


def pack_kda(attn: KDAAttention, state_recurrent: torch.Tensor, state_conv: torch.Tensor) -> KDAPack:
    """Fuse one KDA block's projections and describe its cache state as the kernel's views."""
    projections = [attn.q_proj, attn.k_proj, attn.v_proj, attn.f_proj, attn.g_proj, attn.b_proj]
    in_proj = fuse_rows(attn, [linear.weight for linear in projections])
    width, kernel = attn.config.kda_width, attn.config.short_conv_kernel_size
    weights = KDALayerWeights(
        q_conv=attn.q_conv1d.weight.view(width, kernel),
        k_conv=attn.k_conv1d.weight.view(width, kernel),
        v_conv=attn.v_conv1d.weight.view(width, kernel),
        a_log=attn.A_log,
        dt_bias=attn.dt_bias,
        o_norm=attn.o_norm.weight,
        lower_bound=attn.config.kda_lower_bound,
    )
    # conv [B, 3, W, kernel - 1]: slot 0 q, 1 k, 2 v (KDAState layout), each [B, W, kernel - 1].
    state = KDALayerState(state_conv[:, 0], state_conv[:, 1], state_conv[:, 2], state_recurrent)
    widths = tuple(linear.weight.shape[0] for linear in projections)
    return KDAPack(in_proj, widths, weights, state, attn.o_proj.weight)


def pack_mla(attn: MLAAttention, cache_buffer: torch.Tensor) -> MLAPack:
    """Fuse one MLA block's hidden-reading projections and view kv_b_proj as W_UK / W_UV."""
    lora = bool(attn.config.q_lora_rank)
    q_first = attn.q_a_proj if lora else attn.q_proj
    in_proj = fuse_rows(attn, [q_first.weight, attn.kv_a_proj_with_mqa.weight, attn.g_proj.weight])
    # [H, nope + v, r] -> W_UK [H, nope, r], W_UV^T [H, r, v]
    w_kvb = attn.kv_b_proj.weight.unflatten(0, (attn.num_heads, -1))
    w_uk, w_uv = w_kvb.split([attn.nope_dim, attn.v_dim], dim=1)
    return MLAPack(
        in_proj=in_proj,
        q_rows=q_first.weight.shape[0],
        q_a_norm=attn.q_a_layernorm.weight if lora else None,
        q_b_proj=attn.q_b_proj.weight if lora else None,
        kv_a_norm=attn.kv_a_layernorm.weight,
        w_uk=w_uk,
        w_uv_t=w_uv.transpose(1, 2),
        dense=attn.dense.weight,
        cache=cache_buffer,
    )


def _stack_slots(routed: nn.Parameter, shared: nn.Parameter, rows: slice, stacked: torch.Tensor) -> None:
    """Copy routed `[E, n, k]` and shared `[n, k]` into stacked[:, rows] and re-point both at it."""
    experts = routed.shape[0]
    stacked[:experts, rows].copy_(routed.data)
    stacked[experts, rows].copy_(shared.data)
    routed.data = stacked[:experts, rows]
    shared.data = stacked[experts, rows]


def pack_moe(moe: MoE) -> MoEPack:
    """Stack gate/up (and down) of the routed experts plus the shared expert as slot E."""
    experts, shared = moe.experts, moe.shared_experts
    num, inner, hidden = experts.gate_proj.shape
    if shared.gate_proj.weight.shape[0] != inner:
        raise ConfigError(
            f"fast path: the shared expert width {shared.gate_proj.weight.shape[0]} must equal the routed "
            f"width {inner} to ride as one more expert slot"
        )
    packed = getattr(moe, PACKED_ATTR, None)
    if packed is not None:
        w13, w2 = packed
    else:
        device, dtype = experts.gate_proj.device, experts.gate_proj.dtype
        # [E + 1, 2I, D]: gate rows [0, I), up rows [I, 2I) of every slot; slot E is the shared expert.
        w13 = torch.empty(num + 1, 2 * inner, hidden, device=device, dtype=dtype)
        _stack_slots(experts.gate_proj, shared.gate_proj.weight, slice(0, inner), w13)
        _stack_slots(experts.up_proj, shared.up_proj.weight, slice(inner, 2 * inner), w13)
        _free_cached(device)
        # [E + 1, D, I]
        w2 = torch.empty(num + 1, hidden, inner, device=device, dtype=dtype)
        _stack_slots(experts.down_proj, shared.down_proj.weight, slice(None), w2)
        _free_cached(device)
        setattr(moe, PACKED_ATTR, (w13, w2))
    weights = MoEWeights(
        router=moe.gate.weight,
        expert_bias=moe.gate.expert_bias,
        w13=w13,
        w2=w2,
        shared_slot=num,
        swiglu_limit=experts.limit,
        shared_swiglu_limit=shared.limit,
    )
    return MoEPack(weights, router_fp32=moe.gate.weight.data)


def pack_model(model: LingForCausalLM, cache: ModelCache) -> ModelPack:
    """Pack every main layer of `model` (the MTP layer is not part of a decode step) against `cache`.

    Raises:
        ConfigError: a config the fast step cannot run (batch != 1, eps mismatch, uneven shared expert).
    """
    config = model.config
    if config.rms_norm_eps != L2_NORM_EPS:
        raise ConfigError(
            f"fast path: the KDA kernel uses one eps for L2 norms ({L2_NORM_EPS}) and the output norm "
            f"({config.rms_norm_eps}); they must match"
        )
    layers = []
    for layer in model.main_layers:
        if layer.is_mla:
            buffer = cache.mla[layer.index].buffer
            if buffer.shape[0] != 1:
                raise ConfigError(f"fast path decodes batch 1; the cache holds batch {buffer.shape[0]}")
            attention: KDAPack | MLAPack = pack_mla(layer.attention, buffer)
        else:
            state = cache.kda[layer.index]
            attention = pack_kda(layer.attention, state.recurrent, state.conv)
        if isinstance(layer.mlp, MoE):
            mlp: DensePack | MoEPack = pack_moe(layer.mlp)
        else:
            ffn = layer.mlp
            w13 = fuse_rows(ffn, [ffn.gate_proj.weight, ffn.up_proj.weight])
            mlp = DensePack(w13, ffn.down_proj.weight, ffn.limit)
        layers.append(
            LayerPack(
                layer.index,
                layer.input_layernorm.weight,
                layer.post_attention_layernorm.weight,
                attention,
                mlp,
            )
        )
    rule = RoutingRule(
        top_k=config.num_experts_per_tok,
        n_group=config.n_group,
        topk_group=config.topk_group,
        scale=config.routed_scaling_factor,
        renormalize=True,
    )
    return ModelPack(
        config=config,
        embed=model.model.word_embeddings.weight,
        layers=layers,
        final_norm=model.model.norm.weight,
        lm_head_fp32=model.lm_head.weight.data,
        rule=rule,
    )
