"""LingForCausalLM: the Ling-3.0 decoder (notes §3.0) with the HF checkpoint's tensor names (notes §4).

Pre-norm residual blocks; attention is KDA or MLA by the layer-group rule, the FFN dense SwiGLU below
first_k_dense_replace and MoE above. Each phase runs under a `record_function` so traces read by layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.profiler import record_function

from bubblescope.errors import ConfigError

from .cache import ModelCache
from .config import LingConfig
from .ffn import SwiGLU
from .init import init_linear_, init_normal_, residual_gain
from .kda import KDAAttention
from .mla import MLAAttention
from .moe import MoE
from .mtp import MTPLayer
from .norm import RMSNorm, linear_wide_out


class DecoderLayer(nn.Module):
    """input_layernorm -> attention -> residual -> post_attention_layernorm -> mlp -> residual."""

    def __init__(self, config: LingConfig, index: int, router_dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        hidden, eps = config.hidden_size, config.rms_norm_eps
        self.index = index
        self.is_mla = config.is_mla_layer(index)
        self.input_layernorm = RMSNorm(hidden, eps)
        self.attention = MLAAttention(config, index) if self.is_mla else KDAAttention(config, index)
        self.post_attention_layernorm = RMSNorm(hidden, eps)
        if config.is_moe_layer(index):
            self.mlp: nn.Module = MoE(config, index, router_dtype)
        else:
            self.mlp = SwiGLU(hidden, config.intermediate_size, 0.0, residual_gain(config))

    def forward(
        self, hidden: torch.Tensor, cache: ModelCache | None, positions: torch.Tensor
    ) -> torch.Tensor:
        """hidden [B, T, D] -> [B, T, D]; updates this layer's cache entry in place."""
        normed = self.input_layernorm(hidden)
        if self.is_mla:
            attn = self.attention(normed, None if cache is None else cache.mla[self.index], positions)
        else:
            attn = self.attention(normed, None if cache is None else cache.kda[self.index])
        hidden = hidden + attn
        return hidden + self.mlp(self.post_attention_layernorm(hidden))


@dataclass
class HiddenStates:
    """Output of LingForCausalLM.forward_hidden.

    Attributes:
        final: [B, T, D] after model.norm (what lm_head and the MTP layer read).
        captured: layer index -> [B, T, D] residual stream after that layer (for draft models).
    """

    final: torch.Tensor
    captured: dict[int, torch.Tensor] = field(default_factory=dict)


class LingModel(nn.Module):
    """`model.*`: word_embeddings, layers (main layers, then the MTP layer if any), norm."""

    def __init__(
        self, config: LingConfig, router_dtype: torch.dtype = torch.float32, include_mtp: bool = True
    ) -> None:
        super().__init__()
        self.config = config
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        layers: list[nn.Module] = [
            DecoderLayer(config, i, router_dtype) for i in range(config.num_hidden_layers)
        ]
        if include_mtp and config.num_nextn_predict_layers > 0:
            layers.append(MTPLayer(config, router_dtype))
        self.layers = nn.ModuleList(layers)
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        init_normal_(self.word_embeddings.weight, 1.0, generator)


def default_positions(input_ids: torch.Tensor, start: int) -> torch.Tensor:
    """[B, T] positions start .. start + T - 1."""
    steps = torch.arange(start, start + input_ids.shape[1], device=input_ids.device)
    return steps.expand(input_ids.shape[0], -1)


class LingForCausalLM(nn.Module):
    """Ling-3.0 causal LM; state_dict keys are exactly the HF checkpoint names.

    Args:
        config: model shape.
        router_dtype: dtype of every MoE router weight (fp32 = HF baseline; bf16 = `bf16_gate`).
        lm_head_dtype: dtype of lm_head (fp32 baseline; bf16 = `bf16_lm_head`). Logits are always fp32.
        include_mtp: build the MTP layer when the config has one (a plain decode loop can leave it out).
    """

    def __init__(
        self,
        config: LingConfig,
        *,
        router_dtype: torch.dtype = torch.float32,
        lm_head_dtype: torch.dtype = torch.float32,
        include_mtp: bool = True,
    ) -> None:
        super().__init__()
        self.config = config
        self.model = LingModel(config, router_dtype, include_mtp)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False, dtype=lm_head_dtype)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        init_linear_(self.lm_head.weight, generator)

    @property
    def main_layers(self) -> Sequence[DecoderLayer]:
        return self.model.layers[: self.config.num_hidden_layers]  # type: ignore[return-value]

    def forward_hidden(
        self,
        input_ids: torch.Tensor,
        cache: ModelCache | None = None,
        positions: torch.Tensor | None = None,
        capture_layers: Sequence[int] = (),
    ) -> HiddenStates:
        """Run the main layers.

        Args:
            input_ids: [B, T] token ids.
            cache: decode state, updated in place (length advances by T); None = stateless full forward.
            positions: [B, T]; default cache.length + arange(T) (0.. without a cache).
            capture_layers: layer indices whose output hidden [B, T, D] to return.

        Returns:
            HiddenStates with the final-normed hidden and the captured layers.
        """
        start = 0 if cache is None else cache.length
        positions = default_positions(input_ids, start) if positions is None else positions
        with record_function("ling3.embed"):
            hidden = self.model.word_embeddings(input_ids)
        captured: dict[int, torch.Tensor] = {}
        for layer in self.main_layers:
            with record_function(f"ling3.layer{layer.index}.{'mla' if layer.is_mla else 'kda'}"):
                hidden = layer(hidden, cache, positions)
            if layer.index in capture_layers:
                captured[layer.index] = hidden
        if cache is not None:
            cache.length = start + input_ids.shape[1]
        return HiddenStates(self.model.norm(hidden), captured)

    def compute_logits(self, final_hidden: torch.Tensor) -> torch.Tensor:
        """final_hidden [B, T, D] -> logits [B, T, V] in fp32 (fp64 for fp64 test models)."""
        with record_function("ling3.lm_head"):
            return linear_wide_out(final_hidden, self.lm_head.weight)

    def forward(
        self, input_ids: torch.Tensor, cache: ModelCache | None = None, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        """input_ids [B, T] -> logits [B, T, V] fp32; see forward_hidden for cache and positions."""
        return self.compute_logits(self.forward_hidden(input_ids, cache, positions).final)

    def mtp_logits(
        self,
        final_hidden: torch.Tensor,
        next_ids: torch.Tensor,
        cache: ModelCache | None,
        positions: torch.Tensor,
    ) -> torch.Tensor:
        """Draft logits of the MTP layer for tokens t + 2.

        Args:
            final_hidden: [B, T, D] main final-normed hidden at positions t.
            next_ids: [B, T] the tokens at t + 1.
            cache: its MTP latent cache (cache.mla[num_hidden_layers]) is appended; None = stateless.
            positions: [B, T] positions t.

        Returns:
            [B, T, V] fp32 logits.
        """
        if len(self.model.layers) <= self.config.num_hidden_layers:
            raise ConfigError(
                f"this {self.config.name} model has no MTP layer (none in the config, or built without)"
            )
        mtp = self.model.layers[self.config.num_hidden_layers]
        latent = None if cache is None else cache.mla[self.config.num_hidden_layers]
        with record_function("ling3.mtp"):
            hidden = mtp(final_hidden, self.model.word_embeddings(next_ids), latent, positions)
        return self.compute_logits(hidden)
