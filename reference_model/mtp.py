"""The MTP / NextN layer (notes §3.5), stored as `model.layers.{num_hidden_layers}`.

At position t it combines the main model's final-normed hidden h_t with the embedding of token t+1
and runs one MLA + MoE block with its own latent cache; the shared lm_head turns it into draft logits.
"""

from __future__ import annotations

import torch
from torch import nn

from .cache import LatentCache
from .config import LingConfig
from .init import init_linear_
from .mla import MLAAttention
from .moe import MoE
from .norm import RMSNorm


class MTPLayer(nn.Module):
    """enorm, hnorm, eh_proj [D, 2D], one MLA+MoE decoder block, final_layernorm (HF names).

    Args:
        config: model shape; the layer index is config.num_hidden_layers (unclamped, past the limit lists).
        router_dtype: dtype of its MoE router weight.
    """

    def __init__(self, config: LingConfig, router_dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        index, hidden, eps = config.num_hidden_layers, config.hidden_size, config.rms_norm_eps
        self.layer_index = index
        self.enorm = RMSNorm(hidden, eps)
        self.hnorm = RMSNorm(hidden, eps)
        self.eh_proj = nn.Linear(2 * hidden, hidden, bias=False)
        self.input_layernorm = RMSNorm(hidden, eps)
        self.attention = MLAAttention(config, index)
        self.post_attention_layernorm = RMSNorm(hidden, eps)
        self.mlp = MoE(config, index, router_dtype)
        self.final_layernorm = RMSNorm(hidden, eps)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        init_linear_(self.eh_proj.weight, generator)

    def forward(
        self,
        final_hidden: torch.Tensor,
        next_embeds: torch.Tensor,
        cache: LatentCache | None,
        positions: torch.Tensor,
    ) -> torch.Tensor:
        """One draft step.

        Args:
            final_hidden: [B, T, D] main model's hidden after model.norm at positions t.
            next_embeds: [B, T, D] embeddings of the tokens at t + 1 (embedding first in the concat).
            cache: the MTP layer's own latent cache, or None.
            positions: [B, T] positions t.

        Returns:
            [B, T, D] after final_layernorm (feed to lm_head).
        """
        hidden = self.eh_proj(torch.cat((self.enorm(next_embeds), self.hnorm(final_hidden)), dim=-1))
        hidden = hidden + self.attention(self.input_layernorm(hidden), cache, positions)
        hidden = hidden + self.mlp(self.post_attention_layernorm(hidden))
        return self.final_layernorm(hidden)
