"""Containers for one KDA layer's decode-time weights and state (what the kernel reads besides x)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class KDALayerWeights:
    """The small per-layer tensors the KDA decode kernel reads (the projections run as GEMVs before it).

    Attributes:
        q_conv, k_conv: depthwise conv weights `[H*K, KW]` (HF `[H*K, 1, KW]` squeezed); tap KW-1
            multiplies the current token.
        v_conv: `[H*V, KW]`.
        a_log: `[H]` fp32; decay rate exp(A_log) per head.
        dt_bias: `[H*K]` fp32.
        o_norm: `[V]` gated-output RMSNorm weight shared by all heads.
        lower_bound: safe-gate bound (g in (lower_bound, 0)); -5 for Ling.
    """

    q_conv: torch.Tensor
    k_conv: torch.Tensor
    v_conv: torch.Tensor
    a_log: torch.Tensor
    dt_bias: torch.Tensor
    o_norm: torch.Tensor
    lower_bound: float = -5.0


@dataclass
class KDALayerState:
    """Decode state of one KDA layer, updated in place by each step.

    Attributes:
        q_conv, k_conv: last KW-1 pre-conv inputs `[B, H*K, KW-1]`, oldest first.
        v_conv: `[B, H*V, KW-1]`.
        recurrent: delta-rule state `[B, H, K, V]` fp32.
    """

    q_conv: torch.Tensor
    k_conv: torch.Tensor
    v_conv: torch.Tensor
    recurrent: torch.Tensor
