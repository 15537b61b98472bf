"""Plain PyTorch MoE reference: router, grouped top-k routing, SwiGLU experts, weighted sum (fp32, loops)."""

from __future__ import annotations

import torch
from bubblescope.kernels.moe.params import MoEWeights, RoutingRule


def route_naive(
    logits: torch.Tensor, expert_bias: torch.Tensor, rule: RoutingRule
) -> tuple[torch.Tensor, torch.Tensor]:
    """Grouped top-k routing of router logits.

    Args:
        logits: `[M, E]` router logits (fp32).
        expert_bias: `[E]` selection bias.
        rule: RoutingRule.
    Returns:
        (expert ids `[M, top_k]` int64 in selection order, weights `[M, top_k]` fp32).
    """
    rows, experts = logits.shape
    per_group = experts // rule.n_group
    ids = torch.empty(rows, rule.top_k, dtype=torch.int64, device=logits.device)
    weights = torch.empty(rows, rule.top_k, dtype=torch.float32, device=logits.device)
    for m in range(rows):
        scores = torch.sigmoid(logits[m].float())
        biased = scores + expert_bias.float()
        # Group score = sum of the two largest biased scores of the group.
        group_scores = biased.view(rule.n_group, per_group).topk(2, dim=1).values.sum(dim=1)
        kept_groups = group_scores.topk(rule.topk_group).indices
        allowed = torch.full_like(biased, float("-inf"))
        for group in kept_groups.tolist():
            span = slice(group * per_group, (group + 1) * per_group)
            allowed[span] = biased[span]
        chosen = allowed.topk(rule.top_k).indices
        picked = scores[chosen]
        if rule.renormalize:
            picked = picked / (picked.sum() + 1e-20)
        ids[m] = chosen
        weights[m] = picked * rule.scale
    return ids, weights


def expert_naive(x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor, limit: float) -> torch.Tensor:
    """One SwiGLU expert on one row: w2 (act(gate x) * up x), with the optional clamp L.

    Args:
        x: `[D]`; w13: `[2I, D]` gate rows then up rows; w2: `[D, I]`; limit: 0 for no clamp.
    Returns:
        `[D]` fp32.
    """
    inter = w2.shape[1]
    hidden = w13.float() @ x.float()
    gate, up = hidden[:inter], hidden[inter:]
    act = torch.nn.functional.silu(gate)
    if limit > 0:
        act = act.clamp(max=limit)
        up = up.clamp(-limit, limit)
    return w2.float() @ (act * up)


def moe_naive(x: torch.Tensor, weights: MoEWeights, rule: RoutingRule) -> torch.Tensor:
    """Full MoE layer for `[M, D]` activations: router GEMV (in the router's dtype, fp32 math),
    routing, routed experts weighted, plus the unweighted shared expert.

    Returns:
        `[M, D]` fp32.
    """
    # bf16 gate: x is rounded to bf16 like the bf16 router GEMV input would be.
    x_router = x.to(weights.router.dtype).float()
    logits = x_router @ weights.router.float().T
    ids, gains = route_naive(logits, weights.expert_bias, rule)
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for m in range(x.shape[0]):
        for slot in range(rule.top_k):
            expert = int(ids[m, slot])
            out[m] += gains[m, slot] * expert_naive(
                x[m], weights.w13[expert], weights.w2[expert], weights.swiglu_limit
            )
        if weights.shared_slot is not None:
            shared = weights.shared_slot
            out[m] += expert_naive(x[m], weights.w13[shared], weights.w2[shared], weights.shared_swiglu_limit)
    return out
