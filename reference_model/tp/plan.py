"""The sharding plan: which tensor of Ling is split along which dimension, per module type.

Megatron-style, as a stock engine shards it (notes §1; issue 7):

| module | column-parallel (split output rows) | row-parallel (split input cols) | replicated |
| --- | --- | --- | --- |
| KDA | q/k/v/f/g_proj, b_proj, convs, A_log, dt_bias (by head) | o_proj | o_norm |
| MLA | q_proj or q_b_proj, kv_b_proj, g_proj (by head) | dense | q_a_proj, kv_a_proj_with_mqa, norms |
| SwiGLU (dense, shared expert) | gate_proj, up_proj (by I) | down_proj | |
| routed experts [E, I, D] | gate_proj, up_proj (dim 1) | down_proj [E, D, I] (dim 2) | router |
| lm_head | rows (by vocabulary) | | embedding, norms |

Every split is a contiguous block: head-major layouts keep one head's rows together, so rank r holds
heads r*H/TP .. (r+1)*H/TP - 1 and its KDA state / MLA head math stays local. Each block's output is a
partial sum only after the row-parallel projection: one all-reduce after attention, one after the MLP.
"""

from __future__ import annotations

import torch
from torch import nn

from bubblescope.errors import ConfigError

from ..config import LingConfig
from ..ffn import SwiGLU
from ..kda import KDAAttention
from ..mla import MLAAttention
from ..model import LingForCausalLM
from ..moe import StackedExperts


class ShardingError(ConfigError):
    """A model shape that does not split evenly over the requested number of ranks."""


def check_divisible(config: LingConfig, world_size: int) -> None:
    """Raise ShardingError naming every size that `world_size` does not divide."""
    if world_size < 1:
        raise ShardingError(f"tensor parallel size must be >= 1, got {world_size}")
    sizes = {
        "attention heads": config.num_attention_heads,
        "dense FFN intermediate": config.intermediate_size,
        "expert intermediate": config.moe_intermediate_size,
        "shared expert intermediate": config.moe_shared_expert_intermediate_size * config.num_shared_experts,
        "vocabulary": config.vocab_size,
    }
    bad = [f"{name} {size}" for name, size in sizes.items() if size % world_size]
    if bad:
        raise ShardingError(f"preset {config.name} does not split over {world_size} ranks: {', '.join(bad)}")


def local_config(config: LingConfig, world_size: int) -> LingConfig:
    """The config one rank's modules and decode state see: H / TP attention heads, the rest unchanged.

    KDA state ([B, H, K, V], conv [B, 3, H*K, k-1]) and every head-count reshape read it; MLA latent
    rows are per token, not per head, so the latent cache is replicated at full width.
    """
    check_divisible(config, world_size)
    if world_size == 1:
        return config
    return config.with_(num_attention_heads=config.num_attention_heads // world_size)


def module_shard_dims(module: nn.Module) -> dict[str, int]:
    """Tensors of `module` (names relative to it) that are split, and along which dimension."""
    if isinstance(module, KDAAttention):
        column = (
            "q_proj",
            "k_proj",
            "v_proj",
            "f_proj",
            "g_proj",
            "b_proj",
            "q_conv1d",
            "k_conv1d",
            "v_conv1d",
        )
        dims = {f"{name}.weight": 0 for name in column}
        return {**dims, "A_log": 0, "dt_bias": 0, "o_proj.weight": 1}
    if isinstance(module, MLAAttention):
        query = "q_b_proj" if hasattr(module, "q_b_proj") else "q_proj"
        return {f"{query}.weight": 0, "kv_b_proj.weight": 0, "g_proj.weight": 0, "dense.weight": 1}
    if isinstance(module, SwiGLU):
        return {"gate_proj.weight": 0, "up_proj.weight": 0, "down_proj.weight": 1}
    if isinstance(module, StackedExperts):
        return {"gate_proj": 1, "up_proj": 1, "down_proj": 2}
    if isinstance(module, LingForCausalLM):
        return {"lm_head.weight": 0}
    return {}


def sharding_plan(model: nn.Module) -> dict[str, int]:
    """Fully qualified tensor name -> split dimension, for every split tensor of `model`."""
    plan: dict[str, int] = {}
    for prefix, module in model.named_modules():
        for name, dim in module_shard_dims(module).items():
            plan[f"{prefix}.{name}" if prefix else name] = dim
    return plan


def shard_of(full: torch.Tensor, dim: int, rank: int, world_size: int) -> torch.Tensor:
    """Rank `rank`'s contiguous block of `full` along `dim` (a new, contiguous tensor).

    Raises:
        ShardingError: the dimension does not split evenly.
    """
    size = full.shape[dim]
    if size % world_size:
        raise ShardingError(f"cannot split a dimension of {size} over {world_size} ranks")
    block = size // world_size
    # One copy, contiguous, sharing nothing with `full` (which the caller drops).
    return full.narrow(dim, rank * block, block).clone(memory_format=torch.contiguous_format)


def shard_bytes(model: nn.Module, world_size: int) -> int:
    """Bytes one rank holds after sharding (works on a meta-device model: allocates nothing)."""
    plan = sharding_plan(model)
    total = 0
    for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
        split = world_size if name in plan else 1
        total += tensor.numel() * tensor.element_size() // split
    return total
