"""SwiGLU feed-forward (dense layers and the shared expert) and the clamped activation (notes §3.3-3.4)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .init import init_linear_


def swiglu(gate: torch.Tensor, up: torch.Tensor, limit: float) -> torch.Tensor:
    """act(gate) * up; with limit L > 0 the serving engines' clamp: min(silu(gate), L) * clamp(up, -L, L).

    HF ignores the limit lists; vLLM/SGLang apply them and outputs degrade without (notes §3.3).
    """
    activated = F.silu(gate)
    if limit > 0:
        return activated.clamp(max=limit) * up.clamp(-limit, limit)
    return activated * up


class SwiGLU(nn.Module):
    """down(act(gate(x)) * up(x)), bias-free, HF names gate_proj / up_proj / down_proj.

    Args:
        hidden_size: D.
        intermediate_size: I.
        limit: clamp limit L for this layer (0 = no clamp).
        out_gain: init gain of down_proj (it writes into the residual stream).
    """

    def __init__(
        self, hidden_size: int, intermediate_size: int, limit: float = 0.0, out_gain: float = 1.0
    ) -> None:
        super().__init__()
        self.limit = limit
        self.out_gain = out_gain
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        init_linear_(self.gate_proj.weight, generator)
        init_linear_(self.up_proj.weight, generator)
        init_linear_(self.down_proj.weight, generator, self.out_gain)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden [..., D] -> [..., D]."""
        return self.down_proj(swiglu(self.gate_proj(hidden), self.up_proj(hidden), self.limit))
