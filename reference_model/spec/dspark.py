"""DSpark-shaped block draft (issue 6 §1; notes [R4], [R13]): 5 dense layers, context-KV injection.

Shape for Ling-3.0-flash: hidden 2560, 32 heads of 128, q/k RMSNorm + RoPE, SwiGLU FFN, conditioned on
the target's residual stream after layers 1, 11, 23, 29, 35. Those 5 hidden states are concatenated
(12800), projected by `fc` to 2560 and RMSNorm'ed (`hidden_norm`); every draft layer projects that
context with its own k_proj / v_proj into extra key/value rows ("context KV injection", cached per
position). A block of B slots [anchor, MASK, ..., MASK] at the next B positions runs in ONE parallel
forward (slots see all committed context rows and each other), slot i predicting the token at
anchor_position + i + 1. Embedding and lm_head are the target's. The Markov head (rank 256) adds
markov_out(markov_in[prev_i]) to slot i's logits, prev_i being the anchor for slot 0 and the first-pass
argmax of slot i-1 otherwise: one [B, 256] x [256, V] GEMM, so the block stays one parallel pass.

Choices the public sources leave open (notes, open question 5), made here and documented:
- FFN width = the target's dense intermediate_size (6144 for Flash).
- RoPE: interleaved over the whole head_dim with the target's theta.
- Presets with fewer layers than 42 take the published indices scaled to their depth,
  round(i * (L - 1) / 41); if that collides, evenly spread round(j * (L - 1) / 4), j = 0..4.
Random weights by default; `load_dspark_weights` loads a safetensors file by name.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from bubblescope.errors import ConfigError

from ..config import LingConfig
from ..ffn import SwiGLU
from ..init import init_linear_, init_normal_
from ..norm import RMSNorm, compute_dtype
from ..rope import InterleavedRope

PUBLISHED_TARGET_LAYERS = (1, 11, 23, 29, 35)
PUBLISHED_TARGET_DEPTH = 42


def target_layers_for(num_layers: int) -> tuple[int, ...]:
    """The target layers whose outputs condition the draft, scaled to a preset's depth (module doc)."""
    if num_layers == PUBLISHED_TARGET_DEPTH:
        return PUBLISHED_TARGET_LAYERS
    count = len(PUBLISHED_TARGET_LAYERS)
    if num_layers < count:
        raise ConfigError(f"DSpark needs a target of at least {count} layers, got {num_layers}")
    scaled = tuple(
        round(i * (num_layers - 1) / (PUBLISHED_TARGET_DEPTH - 1)) for i in PUBLISHED_TARGET_LAYERS
    )
    if len(set(scaled)) == count:
        return scaled
    return tuple(round(j * (num_layers - 1) / (count - 1)) for j in range(count))


@dataclass(frozen=True)
class DSparkConfig:
    """Draft shape; `from_target` gives the published shape for Flash and scales for other presets."""

    hidden_size: int
    num_layers: int
    num_heads: int
    head_dim: int
    intermediate_size: int
    target_layers: tuple[int, ...]
    markov_rank: int
    vocab_size: int
    rope_theta: float
    rms_norm_eps: float

    @classmethod
    def from_target(cls, config: LingConfig) -> DSparkConfig:
        return cls(
            hidden_size=config.hidden_size,
            num_layers=5,
            num_heads=config.num_attention_heads,
            head_dim=config.head_dim,
            intermediate_size=config.intermediate_size,
            target_layers=target_layers_for(config.num_hidden_layers),
            markov_rank=min(256, config.vocab_size // 2),
            vocab_size=config.vocab_size,
            rope_theta=config.rope_theta,
            rms_norm_eps=config.rms_norm_eps,
        )


class DSparkAttention(nn.Module):
    """Dense attention with per-head q/k RMSNorm and RoPE, over context rows + the block."""

    def __init__(self, cfg: DSparkConfig) -> None:
        super().__init__()
        width = cfg.num_heads * cfg.head_dim
        self.num_heads, self.head_dim = cfg.num_heads, cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden_size, width, bias=False)
        self.k_proj = nn.Linear(cfg.hidden_size, width, bias=False)
        self.v_proj = nn.Linear(cfg.hidden_size, width, bias=False)
        self.o_proj = nn.Linear(width, cfg.hidden_size, bias=False)
        self.q_norm = RMSNorm(cfg.head_dim, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(cfg.head_dim, cfg.rms_norm_eps)
        self.rope = InterleavedRope(cfg.head_dim, cfg.rope_theta)

    def keys_values(self, source: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """source [1, T, D] at positions [1, T] -> rotated keys, values [1, T, H, Dh]."""
        keys = self.k_norm(self.k_proj(source).unflatten(-1, (self.num_heads, -1)))
        return self.rope(keys, positions), self.v_proj(source).unflatten(-1, (self.num_heads, -1))

    def forward(
        self,
        hidden: torch.Tensor,
        positions: torch.Tensor,
        ctx_keys: torch.Tensor,
        ctx_values: torch.Tensor,
        ctx_visible: torch.Tensor,
    ) -> torch.Tensor:
        """hidden [1, B, D] at positions [1, B]; ctx_* [1, S, H, Dh]; ctx_visible [S] bool -> [1, B, D]."""
        queries = self.rope(self.q_norm(self.q_proj(hidden).unflatten(-1, (self.num_heads, -1))), positions)
        block_keys, block_values = self.keys_values(hidden, positions)
        keys = torch.cat([ctx_keys, block_keys], dim=1)
        values = torch.cat([ctx_values, block_values], dim=1)
        visible = torch.cat([ctx_visible, ctx_visible.new_ones(hidden.shape[1])])
        wide = compute_dtype(hidden.dtype)
        scores = torch.einsum("bqhd,bshd->bhqs", queries.to(wide), keys.to(wide)) * self.head_dim**-0.5
        probs = scores.masked_fill(~visible, float("-inf")).softmax(-1)
        out = torch.einsum("bhqs,bshd->bqhd", probs, values.to(wide)).to(hidden.dtype)
        return self.o_proj(out.flatten(-2))


class DSparkLayer(nn.Module):
    """Pre-norm block: input_layernorm -> self_attn -> residual -> post_attention_layernorm -> mlp."""

    def __init__(self, cfg: DSparkConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = DSparkAttention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = SwiGLU(cfg.hidden_size, cfg.intermediate_size, 0.0, 1.0 / (2 * cfg.num_layers) ** 0.5)


class DSparkModule(nn.Module):
    """The draft's own weights (state_dict names are what load_dspark_weights expects)."""

    def __init__(self, cfg: DSparkConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.fc = nn.Linear(len(cfg.target_layers) * cfg.hidden_size, cfg.hidden_size, bias=False)
        self.hidden_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.layers = nn.ModuleList(DSparkLayer(cfg) for _ in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mask_embedding = nn.Parameter(torch.empty(cfg.hidden_size))
        self.markov_in = nn.Embedding(cfg.vocab_size, cfg.markov_rank)
        self.markov_out = nn.Linear(cfg.markov_rank, cfg.vocab_size, bias=False)

    @torch.no_grad()
    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Seeded random weights with variance-preserving scales; never zeros."""
        residual_gain = (2 * self.cfg.num_layers) ** -0.5
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear):
                writes_residual = name.endswith(("o_proj", "down_proj"))
                init_linear_(module.weight, generator, residual_gain if writes_residual else 1.0)
            elif isinstance(module, RMSNorm):
                module.reset_parameters(generator)
        init_normal_(self.mask_embedding, 1.0, generator)
        init_normal_(self.markov_in.weight, 1.0, generator)
        # The Markov term is a small correction to the lm_head logits.
        init_linear_(self.markov_out.weight, generator, 0.1)
