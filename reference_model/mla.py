"""Multi-head latent attention (notes §3.2): naive form and the weight-absorbed decode form.

Both forms read the same latent cache, one row per position: [RMSNorm(c) (kv_lora_rank) ; rotated
k_pe (qk_rope_head_dim)] — 576 values for Flash. The naive form expands every cached row to per-head
keys and values with kv_b_proj; the absorbed form folds W_UK into the query and W_UV into the output,
so attention runs as MQA over the 576-wide latent (what serving engines run at decode).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .cache import LatentCache
from .config import LingConfig
from .init import init_linear_, residual_gain
from .norm import RMSNorm, compute_dtype
from .rope import InterleavedRope


class MLAAttention(nn.Module):
    """MLA with a head-wise sigmoid output gate; output projection named `dense` (HF names).

    Args:
        config: model shape; q LoRA (q_a_proj -> q_a_layernorm -> q_b_proj) when config.q_lora_rank is set.
        layer_index: position in model.layers (used only for naming/debugging).

    Attributes:
        absorb_decode: when True, single-token steps with a cache use the absorbed form.
    """

    def __init__(self, config: LingConfig, layer_index: int) -> None:
        super().__init__()
        self.config = config
        self.layer_index = layer_index
        self.num_heads = config.num_attention_heads
        self.nope_dim = config.qk_nope_head_dim
        self.rope_dim = config.qk_rope_head_dim
        self.v_dim = config.v_head_dim
        self.latent_dim = config.kv_lora_rank
        self.scale = 1.0 / math.sqrt(config.qk_head_dim)
        self.absorb_decode = True
        hidden, heads = config.hidden_size, config.num_attention_heads
        if config.q_lora_rank:
            self.q_a_proj = nn.Linear(hidden, config.q_lora_rank, bias=False)
            self.q_a_layernorm = RMSNorm(config.q_lora_rank, config.rms_norm_eps)
            self.q_b_proj = nn.Linear(config.q_lora_rank, heads * config.qk_head_dim, bias=False)
        else:
            self.q_proj = nn.Linear(hidden, heads * config.qk_head_dim, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(hidden, config.mla_cache_width, bias=False)
        self.kv_a_layernorm = RMSNorm(config.kv_lora_rank, config.rms_norm_eps)
        self.kv_b_proj = nn.Linear(config.kv_lora_rank, heads * (self.nope_dim + self.v_dim), bias=False)
        self.g_proj = nn.Linear(hidden, heads, bias=False)
        self.dense = nn.Linear(heads * self.v_dim, hidden, bias=False)
        self.rope = InterleavedRope(self.rope_dim, config.rope_theta)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        for name in ("q_a_proj", "q_b_proj", "q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "g_proj"):
            if hasattr(self, name):
                init_linear_(getattr(self, name).weight, generator)
        init_linear_(self.dense.weight, generator, residual_gain(self.config))

    def _queries(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden [B, T, D] -> q [B, T, H, qk_head_dim]."""
        if self.config.q_lora_rank:
            q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(hidden)))
        else:
            q = self.q_proj(hidden)
        return q.unflatten(-1, (self.num_heads, -1))

    def _latent(self, hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """hidden [B, T, D] -> cache rows [B, T, kv_lora_rank + rope_dim] = [normed c ; rotated k_pe]."""
        c, k_pe = self.kv_a_proj_with_mqa(hidden).split([self.latent_dim, self.rope_dim], dim=-1)
        return torch.cat((self.kv_a_layernorm(c), self.rope(k_pe, positions)), dim=-1)

    def _causal_mask(self, query_len: int, key_len: int, device: torch.device) -> torch.Tensor:
        """[T, S] True where key s is visible to query t (queries are the last T of S positions)."""
        offset = key_len - query_len
        q_index = torch.arange(query_len, device=device)[:, None] + offset
        return torch.arange(key_len, device=device)[None, :] <= q_index

    def _softmax(self, scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """scores [B, H, T, S] -> probabilities in the compute dtype."""
        scores = scores.to(compute_dtype(scores.dtype)).masked_fill(~mask, float("-inf"))
        return scores.softmax(dim=-1)

    def attend_naive(self, q_nope: torch.Tensor, q_pe: torch.Tensor, latent: torch.Tensor) -> torch.Tensor:
        """Expand latent rows to per-head K/V, then attend.

        Args:
            q_nope: [B, T, H, nope]; q_pe: [B, T, H, rope] (rotated).
            latent: [B, S, kv_lora_rank + rope], the last T rows belonging to these queries.

        Returns:
            o: [B, T, H, v_head_dim].
        """
        c, k_pe = latent.split([self.latent_dim, self.rope_dim], dim=-1)
        kv = self.kv_b_proj(c).unflatten(-1, (self.num_heads, -1))
        k_nope, value = kv.split([self.nope_dim, self.v_dim], dim=-1)
        scores = torch.einsum("bthn,bshn->bhts", q_nope, k_nope) + torch.einsum("bthr,bsr->bhts", q_pe, k_pe)
        probs = self._softmax(
            scores * self.scale, self._causal_mask(q_nope.shape[1], latent.shape[1], latent.device)
        )
        return torch.einsum("bhts,bshv->bthv", probs.to(value.dtype), value)

    def attend_absorbed(self, q_nope: torch.Tensor, q_pe: torch.Tensor, latent: torch.Tensor) -> torch.Tensor:
        """Same result as attend_naive, computed as MQA over the latent rows (W_UK, W_UV absorbed)."""
        # [H, nope + v, kv_lora_rank] -> W_UK [H, nope, r], W_UV [H, v, r]
        w_kvb = self.kv_b_proj.weight.unflatten(0, (self.num_heads, -1))
        w_uk, w_uv = w_kvb.split([self.nope_dim, self.v_dim], dim=1)
        c, k_pe = latent.split([self.latent_dim, self.rope_dim], dim=-1)
        # [B, T, H, r]
        q_latent = torch.einsum("bthn,hnr->bthr", q_nope, w_uk)
        scores = torch.einsum("bthr,bsr->bhts", q_latent, c) + torch.einsum("bthr,bsr->bhts", q_pe, k_pe)
        probs = self._softmax(
            scores * self.scale, self._causal_mask(q_nope.shape[1], latent.shape[1], latent.device)
        )
        o_latent = torch.einsum("bhts,bsr->bthr", probs.to(c.dtype), c)
        return torch.einsum("bthr,hvr->bthv", o_latent, w_uv)

    def forward(
        self, hidden: torch.Tensor, cache: LatentCache | None, positions: torch.Tensor
    ) -> torch.Tensor:
        """One MLA block.

        Args:
            hidden: [B, T, D] (already input-normed).
            cache: this layer's latent cache, appended in place; None attends within `hidden` only.
            positions: [B, T] integer positions for RoPE.

        Returns:
            [B, T, D].
        """
        q_nope, q_pe = self._queries(hidden).split([self.nope_dim, self.rope_dim], dim=-1)
        q_pe = self.rope(q_pe, positions)
        latent = self._latent(hidden, positions)
        latent = latent if cache is None else cache.append(latent)
        use_absorbed = self.absorb_decode and cache is not None and hidden.shape[1] == 1
        attend = self.attend_absorbed if use_absorbed else self.attend_naive
        heads_out = attend(q_nope, q_pe, latent)
        # Head-wise gate, computed in fp32 (notes §3.2 step 7): [B, T, H, 1]
        wide = compute_dtype(hidden.dtype)
        gate = torch.sigmoid(F.linear(hidden.to(wide), self.g_proj.weight.to(wide)))[..., None]
        return self.dense((heads_out.to(wide) * gate).to(hidden.dtype).flatten(-2))
