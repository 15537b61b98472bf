"""Routing rule and stacked expert weights of one MoE layer, as the MoE kernels take them."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class RoutingRule:
    """Grouped top-k routing (notes §3.3): sigmoid scores, + expert_bias for selection only, groups of
    E/n_group consecutive experts scored by their top-2 sum, keep topk_group groups (others -inf),
    top_k experts, renormalise the un-biased scores (+1e-20) when `renormalize`, times `scale`."""

    top_k: int = 8
    n_group: int = 8
    topk_group: int = 4
    scale: float = 2.5
    renormalize: bool = True


@dataclass
class MoEWeights:
    """Stacked weights of one MoE layer.

    Attributes:
        router: `[E, D]` gate weight, fp32 (HF numerics) or bf16 (`bf16_gate`).
        expert_bias: `[E]` fp32 selection bias.
        w13: `[S, 2*I, D]` gate rows [0, I) then up rows [I, 2I) of every expert slot (not interleaved).
        w2: `[S, D, I]` down projections.
        shared_slot: index in w13/w2 of the shared expert (usually S - 1 == E), or None. The router
            only scores slots 0..E-1.
        swiglu_limit: clamp L of the routed experts (0: none): min(SiLU(gate), L) * clamp(up, -L, L).
        shared_swiglu_limit: the same for the shared expert.
    """

    router: torch.Tensor
    expert_bias: torch.Tensor
    w13: torch.Tensor
    w2: torch.Tensor
    shared_slot: int | None = None
    swiglu_limit: float = 0.0
    shared_swiglu_limit: float = 0.0
