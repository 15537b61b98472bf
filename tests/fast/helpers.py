"""Shared fixtures' data for the fast-path tests."""

from __future__ import annotations

from bubblescope.reference_model.config import DEBUG

# The `debug` preset trimmed so the Triton interpreter fits CI: 3 layers (KDA + dense, KDA + dense,
# MLA + MoE: every block kind, clamps on the MoE layer), 2 heads, top-2 routing. One MoE layer only:
# the unfused MoE costs ~0.1 s of interpreter time per layer and token.
TRIMMED = DEBUG.with_(
    num_hidden_layers=3,
    first_k_dense_replace=2,
    num_attention_heads=2,
    num_experts_per_tok=2,
    expert_swiglu_limit_list=(0.0, 0.0, 4.0),
    share_expert_swiglu_limit_list=(0.0, 5.0, 5.0),
)
