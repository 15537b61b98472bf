"""Bytes the verify window's expert union streams, and its share of the whole verify step's bytes.

A verify of T tokens reads, in every MoE layer, each distinct routed expert its tokens chose — the union
(at most min(E, k*T)), where one decoded token reads k. With `expert_union` on, the experts launch
streams each distinct expert once, so the union is what the window must read; off, each (token, slot)
program streams its expert again and the union is the floor it could reach. The bytes of the verify
step are those of one decode step (`accounting.bytes_per_token`: weights, states, caches) with the k
routed experts of one token replaced by the union, plus the draft's weights:

    verify_bytes = decode_step_bytes - k * L * expert_bytes + union_bytes + draft_bytes
    union_bytes  = (sum over the L MoE layers of distinct experts) * expert_bytes

Counts come from the routed ids the verify recorded (`routing.RoutingProbe.summary`), so the routing
overlap knob is in them as realised. Never reads the device.
"""

from __future__ import annotations

from typing import Any

from ..accounting import dtype_bytes, swiglu_params
from ..config import LingConfig


def expert_bytes(config: LingConfig) -> int:
    """Bytes of one routed expert's gate, up and down weights."""
    return swiglu_params(config.hidden_size, config.moe_intermediate_size) * dtype_bytes(config)


def union_bytes(
    experts: dict[str, Any], config: LingConfig, *, decode_step_bytes: int, draft_bytes: int
) -> dict:
    """What the recorded expert union costs in bytes per verify.

    Args:
        experts: `RoutingProbe.summary()` (needs `distinct_experts_sum_by_verify` and `moe_layers`).
        config: the target's shapes.
        decode_step_bytes: bytes one non-speculative decode step reads at the current context.
        draft_bytes: the draft's weights (read once per verify).
    Returns:
        {expert_bytes, union_bytes_per_verify {mean, min, max}, one_token_routed_bytes, verify_bytes,
         union_share_of_verify_bytes, beyond_one_token_bytes}; {} before any verify.
    """
    sums = experts.get("distinct_experts_sum_by_verify")
    if not isinstance(sums, dict) or not experts.get("verifies"):
        return {}
    size = expert_bytes(config)
    one_token = int(experts["moe_layers"]) * config.num_experts_per_tok * size
    union = {key: int(round(float(sums[key]) * size)) for key in ("mean", "min", "max")}
    verify = int(decode_step_bytes) - one_token + union["mean"] + int(draft_bytes)
    return {
        "expert_bytes": size,
        "union_bytes_per_verify": union,
        "one_token_routed_bytes": one_token,
        "verify_bytes": verify,
        "union_share_of_verify_bytes": round(union["mean"] / verify, 4) if verify > 0 else None,
        "beyond_one_token_bytes": union["mean"] - one_token,
    }
