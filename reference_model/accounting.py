"""Parameter counts and HBM bytes read per decoded token, computed from a LingConfig without allocating.

The formulas restate `shared/notes/ling3_flash.md` §2 per component (one function per block kind).
They are written independently of `tensor_names.expected_tensors` and of the model, and the tests
cross-check all three (sum of numel on the meta device), so the floor can never drift from the model.

Conventions (notes §2.2): `active` counts what one token touches except the embedding table and the
lm_head (router and norms included); `active_with_lm_head` is the published "5.1 B" convention.
Bytes per token are batch 1, no speculation: every weight a token multiplies is read once, the
embedding contributes one row, the KDA recurrent and conv states are read and written, and the MLA
latent cache is read for `context_len` cached tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bubblescope.errors import ConfigError

from .config import LingConfig

FP32_BYTES = 4
BF16_BYTES = 2
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}

WEIGHT_COMPONENTS: tuple[str, ...] = (
    "kda",
    "mla",
    "dense_ffn",
    "routed_experts",
    "shared_experts",
    "router",
    "norms",
    "lm_head",
    "embedding_row",
    "mtp",
)
STATE_COMPONENTS: tuple[str, ...] = ("kda_state", "conv_state", "mla_cache")


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts of one model (no allocation).

    Attributes:
        total: every parameter of the checkpoint (MTP layers only with include_mtp).
        active: parameters one decoded token uses, without embedding and lm_head (router, norms in).
        active_with_lm_head: `active` + lm_head (the published "5.1 B active" for Flash).
        active_with_embedding: `active_with_lm_head` + the whole embedding table (vLLM's "5.5 B").
        embedding, lm_head, routed_experts, mtp: those parts of `total`.
        by_component: total parameters per component name (same names as BytesBreakdown weights).
    """

    total: int
    active: int
    active_with_lm_head: int
    active_with_embedding: int
    embedding: int
    lm_head: int
    routed_experts: int
    mtp: int
    by_component: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class BytesBreakdown:
    """HBM bytes one decoded token reads (and, for states, writes), per component.

    Attributes:
        components: bytes per component; keys from WEIGHT_COMPONENTS and STATE_COMPONENTS.
        weights: sum of the weight components.
        total: weights + KDA recurrent state + conv state + MLA latent cache.
        context_len, tp, router_bf16, lm_head_bf16, include_mtp: the inputs it was computed for.
    """

    components: dict[str, int]
    weights: int
    total: int
    context_len: int
    tp: int
    router_bf16: bool
    lm_head_bf16: bool
    include_mtp: bool


# Parameters per block, as (count at element size of the model dtype, count kept in fp32) ------------


def kda_block_params(config: LingConfig, tp: int = 1) -> tuple[int, int]:
    """One KDA attention block per GPU at `tp`, as (model-dtype params, fp32 params: A_log, dt_bias).

    Heads split across GPUs; o_norm (shared by all heads) is replicated.
    """
    hidden, heads = config.hidden_size, config.num_attention_heads // tp
    width = heads * config.head_dim
    projections = 5 * width * hidden + width * hidden  # q, k, v, f, g (out x in) + o_proj (in x out)
    model_dtype = projections + heads * hidden + 3 * width * config.short_conv_kernel_size + config.head_dim
    return model_dtype, heads + width


def mla_block_params(config: LingConfig, tp: int = 1) -> int:
    """One MLA attention block (per GPU at `tp`): heads split, latent projection and its norm replicated."""
    hidden, heads = config.hidden_size, config.num_attention_heads // tp
    if config.q_lora_rank is None:
        query = heads * config.qk_head_dim * hidden
    else:
        rank = config.q_lora_rank
        query = rank * hidden + rank + heads * config.qk_head_dim * rank
    latent = config.mla_cache_width * hidden + config.kv_lora_rank
    up = heads * (config.qk_nope_head_dim + config.v_head_dim) * config.kv_lora_rank
    gate = heads * hidden
    dense = hidden * heads * config.v_head_dim
    return query + latent + up + gate + dense


def swiglu_params(hidden: int, intermediate: int) -> int:
    """gate_proj + up_proj + down_proj of one SwiGLU MLP."""
    return 3 * hidden * intermediate


def router_params(config: LingConfig) -> tuple[int, int]:
    """Router of one MoE layer as (gate weight, fp32 expert bias); replicated under TP."""
    return config.num_experts * config.hidden_size, config.num_experts


def layer_norm_params(config: LingConfig) -> int:
    """input_layernorm + post_attention_layernorm of one decoder layer."""
    return 2 * config.hidden_size


def mtp_extra_params(config: LingConfig) -> int:
    """enorm, hnorm, final_layernorm and eh_proj of one MTP layer."""
    return 3 * config.hidden_size + config.hidden_size * 2 * config.hidden_size


def _shared_width(config: LingConfig) -> int:
    return config.num_shared_experts * config.moe_shared_expert_intermediate_size


def _moe_layer_count(config: LingConfig) -> int:
    return sum(1 for i in range(config.num_hidden_layers) if config.is_moe_layer(i))


def _mtp_layer_params(config: LingConfig, *, experts: int) -> int:
    """One MTP layer with `experts` routed experts (all of them for the total, top-k for active)."""
    hidden = config.hidden_size
    weight, bias = router_params(config)
    return (
        mla_block_params(config)
        + experts * swiglu_params(hidden, config.moe_intermediate_size)
        + swiglu_params(hidden, _shared_width(config))
        + weight
        + bias
        + layer_norm_params(config)
        + mtp_extra_params(config)
    )


def _component_params(config: LingConfig, *, experts_per_layer: int) -> dict[str, int]:
    """Parameters per component over the main layers, with `experts_per_layer` routed experts counted."""
    hidden, kda_count, mla_count = config.hidden_size, len(config.kda_layers), len(config.mla_layers)
    moe_count = _moe_layer_count(config)
    dense_count = config.num_hidden_layers - moe_count
    kda_model, kda_fp32 = kda_block_params(config)
    weight, bias = router_params(config)
    return {
        "kda": kda_count * (kda_model + kda_fp32),
        "mla": mla_count * mla_block_params(config),
        "dense_ffn": dense_count * swiglu_params(hidden, config.intermediate_size),
        "routed_experts": moe_count * experts_per_layer * swiglu_params(hidden, config.moe_intermediate_size),
        "shared_experts": moe_count * swiglu_params(hidden, _shared_width(config)),
        "router": moe_count * (weight + bias),
        "norms": config.num_hidden_layers * layer_norm_params(config) + hidden,
    }


def count_parameters(config: LingConfig, *, include_mtp: bool = False) -> ParamCounts:
    """Total and active parameter counts from the config alone.

    Args:
        config: the model shape.
        include_mtp: add the `num_nextn_predict_layers` MTP layers to total (and active, one draft pass).

    Returns:
        ParamCounts; for ling3-flash total 124,414,211,552 (127.49 B with MTP), active_with_lm_head 5.103 B.
    """
    table = config.vocab_size * config.hidden_size
    by_component = _component_params(config, experts_per_layer=config.num_experts)
    active_parts = _component_params(config, experts_per_layer=config.num_experts_per_tok)
    mtp_layers = config.num_nextn_predict_layers if include_mtp else 0
    mtp_total = mtp_layers * _mtp_layer_params(config, experts=config.num_experts)
    mtp_active = mtp_layers * _mtp_layer_params(config, experts=config.num_experts_per_tok)
    by_component.update({"lm_head": table, "embedding": table, "mtp": mtp_total})
    active = sum(active_parts.values()) + mtp_active
    return ParamCounts(
        total=sum(by_component.values()),
        active=active,
        active_with_lm_head=active + table,
        active_with_embedding=active + 2 * table,
        embedding=table,
        lm_head=table,
        routed_experts=by_component["routed_experts"],
        mtp=mtp_total,
        by_component=by_component,
    )


def dtype_bytes(config: LingConfig) -> int:
    """Bytes per element of the model dtype (weights, activations, conv state, MLA cache)."""
    try:
        return _DTYPE_BYTES[config.dtype]
    except KeyError:
        raise ConfigError(f"{config.name}: unsupported dtype {config.dtype!r}") from None


def check_tp(config: LingConfig, tp: int) -> None:
    """Refuse a TP degree that does not split heads and FFN widths evenly (one-line ConfigError)."""
    if tp < 1:
        raise ConfigError(f"--tp must be >= 1, got {tp}")
    widths = {
        "num_attention_heads": config.num_attention_heads,
        "intermediate_size": config.intermediate_size,
        "moe_intermediate_size": config.moe_intermediate_size,
        "moe_shared_expert_intermediate_size": _shared_width(config),
    }
    uneven = [f"{name}={value}" for name, value in widths.items() if value % tp]
    if uneven:
        raise ConfigError(f"{config.name}: tp={tp} does not divide {', '.join(uneven)}")


def bytes_per_token(
    config: LingConfig,
    *,
    context_len: int,
    router_bf16: bool = False,
    lm_head_bf16: bool = False,
    tp: int = 1,
    include_mtp: bool = False,
) -> BytesBreakdown:
    """HBM bytes one decoded token moves on one GPU (batch 1, no speculation).

    Args:
        config: the model shape; weights, conv state and MLA cache use its dtype.
        context_len: cached tokens the MLA layers attend over (the latent cache read grows with it).
        router_bf16: router gate weight read in bf16 (else fp32, as HF computes it); bias stays fp32.
        lm_head_bf16: lm_head read in bf16 (else fp32).
        tp: tensor-parallel degree; returns one GPU's share: KDA/MLA heads, dense FFN and every expert's
            intermediate dim split tp ways, lm_head split by vocab (rounded up), router, norms, MLA
            latent projection and latent cache replicated, the embedding row read by its owner only.
        include_mtp: add one MTP draft forward (its MLA, MoE, eh_proj, norms, a second lm_head read,
            its latent cache) as component "mtp" / "mla_cache".

    Returns:
        BytesBreakdown; for ling3-flash with bf16 router and lm_head, weights = 10.207 GB.
    """
    if context_len < 0:
        raise ConfigError(f"context length must be >= 0, got {context_len}")
    check_tp(config, tp)
    elem = dtype_bytes(config)
    router_weight_bytes = BF16_BYTES if router_bf16 else FP32_BYTES
    lm_head_bytes = BF16_BYTES if lm_head_bf16 else FP32_BYTES
    hidden, topk = config.hidden_size, config.num_experts_per_tok
    moe_count = _moe_layer_count(config)
    kda_model, kda_fp32 = kda_block_params(config, tp)
    gate_weight, gate_bias = router_params(config)
    router = gate_weight * router_weight_bytes + gate_bias * FP32_BYTES
    expert = swiglu_params(hidden, config.moe_intermediate_size // tp) * elem
    shared = swiglu_params(hidden, _shared_width(config) // tp) * elem
    lm_head = -(-config.vocab_size // tp) * hidden * lm_head_bytes
    components = {
        "kda": len(config.kda_layers) * (kda_model * elem + kda_fp32 * FP32_BYTES),
        "mla": len(config.mla_layers) * mla_block_params(config, tp) * elem,
        "dense_ffn": (config.num_hidden_layers - moe_count)
        * swiglu_params(hidden, config.intermediate_size // tp)
        * elem,
        "routed_experts": moe_count * topk * expert,
        "shared_experts": moe_count * shared,
        "router": moe_count * router,
        "norms": (config.num_hidden_layers * layer_norm_params(config) + hidden) * elem,
        "lm_head": lm_head,
        "embedding_row": hidden * elem,
        "mtp": 0,
    }
    mla_cache_layers = len(config.mla_layers)
    if include_mtp and config.num_nextn_predict_layers:
        mtp_layer = (
            mla_block_params(config, tp) * elem
            + topk * expert
            + shared
            + router
            + (layer_norm_params(config) + mtp_extra_params(config)) * elem
        )
        # Each draft forward embeds the next token (one row) and runs the full lm_head again.
        components["mtp"] = config.num_nextn_predict_layers * (mtp_layer + lm_head + hidden * elem)
        mla_cache_layers += config.num_nextn_predict_layers
    components.update(_state_bytes(config, context_len=context_len, tp=tp, mla_layers=mla_cache_layers))
    weights = sum(components[name] for name in WEIGHT_COMPONENTS)
    return BytesBreakdown(
        components=components,
        weights=weights,
        total=weights + sum(components[name] for name in STATE_COMPONENTS),
        context_len=context_len,
        tp=tp,
        router_bf16=router_bf16,
        lm_head_bf16=lm_head_bf16,
        include_mtp=include_mtp,
    )


def _state_bytes(config: LingConfig, *, context_len: int, tp: int, mla_layers: int) -> dict[str, int]:
    """Recurrent state, conv state (both read and written each token) and the MLA latent cache read."""
    elem = dtype_bytes(config)
    heads = config.num_attention_heads // tp
    kda_count = len(config.kda_layers)
    # [H, K, V] fp32 per KDA layer, read then written back.
    recurrent = heads * config.head_dim * config.head_dim * FP32_BYTES
    # q, k, v convs keep the last (kernel - 1) pre-conv inputs per channel, in the activation dtype.
    conv = 3 * heads * config.head_dim * (config.short_conv_kernel_size - 1) * elem
    # MLA caches [latent ; rope key] per token per layer; it is replicated on every TP rank.
    cache_per_token = config.mla_cache_width * elem
    return {
        "kda_state": kda_count * recurrent * 2,
        "conv_state": kda_count * conv * 2,
        "mla_cache": mla_layers * cache_per_token * context_len,
    }


def weight_memory_bytes(config: LingConfig, *, include_mtp: bool = True) -> int:
    """Bytes the weights occupy in memory at the model dtype (fp32 for A_log, dt_bias, router bias)."""
    counts = count_parameters(config, include_mtp=include_mtp)
    kda_fp32 = len(config.kda_layers) * kda_block_params(config)[1]
    moe_layers = _moe_layer_count(config) + (config.num_nextn_predict_layers if include_mtp else 0)
    fp32 = kda_fp32 + moe_layers * router_params(config)[1]
    return (counts.total - fp32) * dtype_bytes(config) + fp32 * FP32_BYTES


# Headroom for caches, activations and allocator slack on top of the weights (as init.check_fits uses).
FIT_HEADROOM_FRACTION = 0.05
FIT_HEADROOM_BYTES = 1 << 30


def min_devices_to_fit(config: LingConfig, bytes_per_device: int, *, max_devices: int) -> int | None:
    """Smallest TP degree (1, 2, 4, ... up to max_devices, dividing the model) whose weights fit a device.

    One device's share is taken as weight memory / tp (replicated router, norms and latent projection
    are under 1 % of it), plus 5 % and 1 GiB of headroom.

    Returns:
        the degree, or None when even max_devices do not suffice.
    """
    weights = weight_memory_bytes(config)
    tp = 1
    while tp <= max_devices:
        need = weights / tp * (1 + FIT_HEADROOM_FRACTION) + FIT_HEADROOM_BYTES
        try:
            check_tp(config, tp)
        except ConfigError:
            return None
        if need <= bytes_per_device:
            return tp
        tp *= 2
    return None
