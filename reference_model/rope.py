"""Interleaved (GPT-J) rotary embedding over the MLA rope dims (notes §3.2 step 5).

Pairs (2j, 2j+1) are rotated in place by pos * theta^(-2j/rope_dim). HF de-interleaves and uses
rotate_half instead; the stored order of the rotated dims differs but every q.k product is identical.
"""

from __future__ import annotations

import torch
from torch import nn

from .norm import compute_dtype


class InterleavedRope(nn.Module):
    """Rotary embedding with interleaved pairs; angles computed per call from integer positions.

    Args:
        rope_dim: rotated width (qk_rope_head_dim, 64 for Flash), even.
        theta: base (config.rope_theta).
    """

    def __init__(self, rope_dim: int, theta: float) -> None:
        super().__init__()
        exponents = torch.arange(0, rope_dim, 2, dtype=torch.float64) / rope_dim
        # Non-persistent: derived from the config, never part of a checkpoint.
        self.register_buffer("inv_freq", (theta**-exponents).to(torch.float32), persistent=False)

    def forward(self, features: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rotate `features`.

        Args:
            features: [B, T, ..., rope_dim]; any axes between T and the last are broadcast (heads).
            positions: [B, T] integer positions.

        Returns:
            [B, T, ..., rope_dim], same dtype as features.
        """
        wide = compute_dtype(features.dtype)
        # [B, T, rope_dim / 2]
        angles = positions.to(wide)[..., None] * self.inv_freq.to(wide)
        for _ in range(features.dim() - 3):
            angles = angles.unsqueeze(-2)
        cos, sin = angles.cos(), angles.sin()
        pairs = features.to(wide).unflatten(-1, (-1, 2))
        even, odd = pairs[..., 0], pairs[..., 1]
        rotated = torch.stack((even * cos - odd * sin, odd * cos + even * sin), dim=-1)
        return rotated.flatten(-2).to(features.dtype)
