"""MoE for decode: grouped top-k routing, unfused (4 launches) and fused (2 launches for one row)
layers, reference."""

from bubblescope.kernels.moe.naive import expert_naive, moe_naive, route_naive
from bubblescope.kernels.moe.ops import moe_fused, moe_unfused, route_topk
from bubblescope.kernels.moe.params import FusedMoEConfig, MoEWeights, MoEWorkspace, RoutingRule

__all__ = [
    "FusedMoEConfig",
    "MoEWeights",
    "MoEWorkspace",
    "RoutingRule",
    "expert_naive",
    "moe_fused",
    "moe_naive",
    "moe_unfused",
    "route_naive",
    "route_topk",
]
