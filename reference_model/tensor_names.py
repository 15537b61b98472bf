"""The Hugging Face tensor names and shapes a Ling-3.0 checkpoint holds, derived from a LingConfig alone.

Follows `shared/notes/ling3_flash.md` §4: linears are `[out, in]`, KDA conv weights `[C, 1, kernel]`,
MoE layers `mlp.experts.{e}.*` plus `mlp.shared_experts.*` and the router `mlp.gate.*`, and the MTP
layer stored as `model.layers.{num_hidden_layers + j}`. The loader checks checkpoints against the model's
own state_dict; this map is the independent statement of what that state_dict must be, and the
per-component parameter accounting is cross-checked against it.
"""

from __future__ import annotations

from .config import LingConfig

Shape = tuple[int, ...]

# Created (and kept) in fp32 by HF and the serving engines regardless of the model dtype (notes §1.1).
FP32_TENSOR_SUFFIXES: tuple[str, ...] = ("attention.A_log", "attention.dt_bias", "mlp.gate.expert_bias")

# Re-exports name the router bias after DeepSeek-V3 (notes §4, [R9b]); the loader accepts either.
EXPERT_BIAS_ALIASES: dict[str, str] = {"mlp.gate.e_score_correction_bias": "mlp.gate.expert_bias"}


def expected_tensors(config: LingConfig, *, include_mtp: bool = True) -> dict[str, Shape]:
    """Every tensor name of the checkpoint (and of `LingForCausalLM(config).state_dict()`) with its shape.

    Args:
        config: the model shape.
        include_mtp: include the `num_nextn_predict_layers` MTP layers (default True, like the checkpoint).

    Returns:
        dict name -> shape, in checkpoint order (embedding, layers, final norm, lm_head).
    """
    hidden = config.hidden_size
    tensors: dict[str, Shape] = {"model.word_embeddings.weight": (config.vocab_size, hidden)}
    mtp_layers = config.num_nextn_predict_layers if include_mtp else 0
    for index in range(config.num_hidden_layers + mtp_layers):
        prefix = f"model.layers.{index}."
        tensors[prefix + "input_layernorm.weight"] = (hidden,)
        attention = _mla_tensors(config) if config.is_mla_layer(index) else _kda_tensors(config)
        tensors.update({prefix + "attention." + name: shape for name, shape in attention.items()})
        tensors[prefix + "post_attention_layernorm.weight"] = (hidden,)
        ffn = _moe_tensors(config) if config.is_moe_layer(index) else _dense_ffn_tensors(config)
        tensors.update({prefix + "mlp." + name: shape for name, shape in ffn.items()})
        if index >= config.num_hidden_layers:
            tensors.update({prefix + name: shape for name, shape in _mtp_extra_tensors(config).items()})
    tensors["model.norm.weight"] = (hidden,)
    tensors["lm_head.weight"] = (config.vocab_size, hidden)
    return tensors


def is_fp32_tensor(name: str) -> bool:
    """True for the tensors kept in fp32 whatever the model dtype (A_log, dt_bias, router bias)."""
    return name.endswith(FP32_TENSOR_SUFFIXES)


def canonical_name(name: str) -> str:
    """Map an accepted alias (`gate.e_score_correction_bias`) to the model's name; others unchanged."""
    for alias, canonical in EXPERT_BIAS_ALIASES.items():
        if name.endswith(alias):
            return name[: -len(alias)] + canonical
    return name


def _kda_tensors(config: LingConfig) -> dict[str, Shape]:
    hidden, width, heads = config.hidden_size, config.kda_width, config.num_attention_heads
    conv = (width, 1, config.short_conv_kernel_size)
    return {
        "q_proj.weight": (width, hidden),
        "k_proj.weight": (width, hidden),
        "v_proj.weight": (width, hidden),
        "q_conv1d.weight": conv,
        "k_conv1d.weight": conv,
        "v_conv1d.weight": conv,
        "f_proj.weight": (width, hidden),
        "b_proj.weight": (heads, hidden),
        "g_proj.weight": (width, hidden),
        "A_log": (heads,),
        "dt_bias": (width,),
        "o_norm.weight": (config.head_dim,),
        "o_proj.weight": (hidden, width),
    }


def _mla_tensors(config: LingConfig) -> dict[str, Shape]:
    hidden, heads = config.hidden_size, config.num_attention_heads
    q_width = heads * config.qk_head_dim
    tensors: dict[str, Shape] = {}
    if config.q_lora_rank is None:
        tensors["q_proj.weight"] = (q_width, hidden)
    else:
        tensors["q_a_proj.weight"] = (config.q_lora_rank, hidden)
        tensors["q_a_layernorm.weight"] = (config.q_lora_rank,)
        tensors["q_b_proj.weight"] = (q_width, config.q_lora_rank)
    kv_b_rows = heads * (config.qk_nope_head_dim + config.v_head_dim)
    tensors.update(
        {
            "kv_a_proj_with_mqa.weight": (config.mla_cache_width, hidden),
            "kv_a_layernorm.weight": (config.kv_lora_rank,),
            "kv_b_proj.weight": (kv_b_rows, config.kv_lora_rank),
            "g_proj.weight": (heads, hidden),
            "dense.weight": (hidden, heads * config.v_head_dim),
        }
    )
    return tensors


def _swiglu_tensors(hidden: int, intermediate: int) -> dict[str, Shape]:
    return {
        "gate_proj.weight": (intermediate, hidden),
        "up_proj.weight": (intermediate, hidden),
        "down_proj.weight": (hidden, intermediate),
    }


def _dense_ffn_tensors(config: LingConfig) -> dict[str, Shape]:
    return _swiglu_tensors(config.hidden_size, config.intermediate_size)


def _moe_tensors(config: LingConfig) -> dict[str, Shape]:
    hidden = config.hidden_size
    tensors: dict[str, Shape] = {
        "gate.weight": (config.num_experts, hidden),
        "gate.expert_bias": (config.num_experts,),
    }
    for expert in range(config.num_experts):
        expert_tensors = _swiglu_tensors(hidden, config.moe_intermediate_size)
        tensors.update({f"experts.{expert}.{name}": shape for name, shape in expert_tensors.items()})
    if config.num_shared_experts:
        # HF builds the shared experts as one SwiGLU of num_shared x the shared width.
        shared_width = config.num_shared_experts * config.moe_shared_expert_intermediate_size
        shared = _swiglu_tensors(hidden, shared_width)
        tensors.update({f"shared_experts.{name}": shape for name, shape in shared.items()})
    return tensors


def _mtp_extra_tensors(config: LingConfig) -> dict[str, Shape]:
    hidden = config.hidden_size
    return {
        "enorm.weight": (hidden,),
        "hnorm.weight": (hidden,),
        "eh_proj.weight": (hidden, 2 * hidden),
        "final_layernorm.weight": (hidden,),
    }
