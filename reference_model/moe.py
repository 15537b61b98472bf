"""Sparse MoE (notes §3.3): grouped sigmoid router with selection bias, routed + shared SwiGLU experts.

Routed experts are stored stacked ([E, I, D]) so a decode step can gather the selected experts' weights
on device without a host read; the state_dict still carries the HF per-expert names
(`experts.{j}.gate_proj.weight` [I, D], ...), translated by hooks on StackedExperts.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .config import LingConfig
from .ffn import SwiGLU, swiglu
from .init import init_linear_, init_normal_, residual_gain
from .norm import compute_dtype, linear_wide_out

PROJECTIONS = ("gate_proj", "up_proj", "down_proj")


class MoERouter(nn.Module):
    """Router `gate`: weight [E, D], expert_bias [E] (selection only), group-limited top-k.

    Args:
        config: expert counts, groups, top-k and scaling.
        dtype: router weight dtype; logits are computed in it (fp32 baseline, bf16 for `bf16_gate`).
    """

    def __init__(self, config: LingConfig, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.num_experts = config.num_experts
        self.top_k = config.num_experts_per_tok
        self.n_group = config.n_group
        self.topk_group = config.topk_group
        self.scaling = config.routed_scaling_factor
        self.weight = nn.Parameter(torch.empty(config.num_experts, config.hidden_size, dtype=dtype))
        # HF keeps the bias fp32 whatever the model dtype; wider only in fp64 test models.
        bias_dtype = compute_dtype(torch.get_default_dtype())
        self.expert_bias = nn.Parameter(torch.zeros(config.num_experts, dtype=bias_dtype))

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        init_linear_(self.weight, generator)
        init_normal_(self.expert_bias, 0.05, generator)

    def select(self, scores: torch.Tensor) -> torch.Tensor:
        """Group-limited top-k on biased scores.

        Args:
            scores: [N, E] un-biased sigmoid scores.

        Returns:
            [N, top_k] selected expert ids.
        """
        biased = scores + self.expert_bias.to(scores.dtype)
        # [N, G, E / G]
        grouped = biased.unflatten(-1, (self.n_group, -1))
        group_scores = grouped.topk(min(2, grouped.shape[-1]), dim=-1).values.sum(dim=-1)
        kept_groups = group_scores.topk(self.topk_group, dim=-1).indices
        keep = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(-1, kept_groups, True)
        # -inf, not 0: biased scores can be negative, and a 0 would let excluded groups win.
        masked = grouped.masked_fill(~keep[..., None], float("-inf")).flatten(-2)
        return masked.topk(self.top_k, dim=-1).indices

    def forward(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """hidden [N, D] -> (expert ids [N, top_k], weights [N, top_k] in the compute dtype)."""
        scores = torch.sigmoid(linear_wide_out(hidden, self.weight))
        expert_ids = self.select(scores)
        chosen = scores.gather(-1, expert_ids)
        weights = chosen / (chosen.sum(dim=-1, keepdim=True) + 1e-20) * self.scaling
        return expert_ids, weights


class StackedExperts(nn.Module):
    """E SwiGLU experts stored as [E, I, D] / [E, I, D] / [E, D, I]; HF per-expert names in state_dict."""

    def __init__(self, config: LingConfig, limit: float) -> None:
        super().__init__()
        num, hidden, inner = config.num_experts, config.hidden_size, config.moe_intermediate_size
        self.limit = limit
        self.out_gain = residual_gain(config)
        self.gate_proj = nn.Parameter(torch.empty(num, inner, hidden))
        self.up_proj = nn.Parameter(torch.empty(num, inner, hidden))
        self.down_proj = nn.Parameter(torch.empty(num, hidden, inner))
        self.register_state_dict_post_hook(_split_experts)
        self.register_load_state_dict_pre_hook(_stack_experts)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        init_linear_(self.gate_proj, generator)
        init_linear_(self.up_proj, generator)
        init_linear_(self.down_proj, generator, self.out_gain)

    def forward_gathered(
        self, hidden: torch.Tensor, expert_ids: torch.Tensor, weights: torch.Tensor
    ) -> torch.Tensor:
        """Gather the selected experts' weights on device (no host read); for few tokens.

        Args:
            hidden: [N, D]; expert_ids, weights: [N, k].

        Returns:
            [N, D] in the compute dtype.
        """
        gate = torch.einsum("nd,nkid->nki", hidden, self.gate_proj[expert_ids])
        up = torch.einsum("nd,nkid->nki", hidden, self.up_proj[expert_ids])
        out = torch.einsum("nki,nkdi->nkd", swiglu(gate, up, self.limit), self.down_proj[expert_ids])
        return torch.einsum("nkd,nk->nd", out.to(weights.dtype), weights)

    def forward_grouped(
        self, hidden: torch.Tensor, expert_ids: torch.Tensor, weights: torch.Tensor
    ) -> torch.Tensor:
        """Run each hit expert once over its tokens; reads the per-expert counts to the host (prefill)."""
        top_k = expert_ids.shape[-1]
        flat_ids = expert_ids.flatten()
        order = flat_ids.argsort(stable=True)
        counts = torch.bincount(flat_ids, minlength=self.gate_proj.shape[0]).tolist()
        out = torch.zeros(hidden.shape, dtype=weights.dtype, device=hidden.device)
        start = 0
        for expert, count in enumerate(counts):
            if count == 0:
                continue
            rows = order[start : start + count]
            start += count
            tokens = rows // top_k
            chosen = hidden[tokens]
            act = swiglu(
                F.linear(chosen, self.gate_proj[expert]), F.linear(chosen, self.up_proj[expert]), self.limit
            )
            expert_out = F.linear(act, self.down_proj[expert]).to(weights.dtype)
            out.index_add_(0, tokens, expert_out * weights.flatten()[rows, None])
        return out


def _split_experts(module: nn.Module, state_dict: dict, prefix: str, local_metadata: dict) -> None:
    for name in PROJECTIONS:
        stacked = state_dict.pop(prefix + name)
        for expert in range(stacked.shape[0]):
            state_dict[f"{prefix}{expert}.{name}.weight"] = stacked[expert]


def _stack_experts(module: nn.Module, state_dict: dict, prefix: str, *_args: object) -> None:
    num = module.gate_proj.shape[0]
    for name in PROJECTIONS:
        keys = [f"{prefix}{expert}.{name}.weight" for expert in range(num)]
        # Incomplete sets are left alone so load_state_dict reports the missing/unexpected names.
        if all(key in state_dict for key in keys):
            state_dict[prefix + name] = torch.stack([state_dict.pop(key) for key in keys])


class MoE(nn.Module):
    """y = sum_i w_i E_i(x) + E_shared(x) with HF names gate / experts / shared_experts.

    Args:
        config: model shape.
        layer_index: selects the clamp limits (config.expert_swiglu_limit(i), shared_expert_swiglu_limit(i)).
        router_dtype: dtype of gate.weight.

    Attributes:
        gather_max_rows: token x expert pairs up to which experts run gathered (no host read).
    """

    def __init__(
        self, config: LingConfig, layer_index: int, router_dtype: torch.dtype = torch.float32
    ) -> None:
        super().__init__()
        self.gate = MoERouter(config, router_dtype)
        self.experts = StackedExperts(config, config.expert_swiglu_limit(layer_index))
        shared_inner = config.moe_shared_expert_intermediate_size * config.num_shared_experts
        self.shared_experts = SwiGLU(
            config.hidden_size,
            shared_inner,
            config.shared_expert_swiglu_limit(layer_index),
            residual_gain(config),
        )
        self.gather_max_rows = 64

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden [B, T, D] (post-attention-normed) -> [B, T, D]."""
        flat = hidden.flatten(0, -2)
        expert_ids, weights = self.gate(flat)
        use_gather = expert_ids.numel() <= self.gather_max_rows
        run = self.experts.forward_gathered if use_gather else self.experts.forward_grouped
        routed = run(flat, expert_ids, weights)
        return (routed.to(hidden.dtype) + self.shared_experts(flat)).view(hidden.shape)
