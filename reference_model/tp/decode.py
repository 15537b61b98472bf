"""Greedy prefill + decode of a tensor-parallel model (every rank runs this in lockstep)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..cache import ModelCache
from ..generate import PREFILL_CHUNK_TOKENS
from ..model import LingForCausalLM
from .lm_head import greedy_tokens


def new_tp_cache(model: LingForCausalLM, capacity: int, batch: int = 1) -> ModelCache:
    """Decode state for this rank: KDA states of its local heads, full-width MLA latent caches."""
    embed = model.model.word_embeddings.weight
    return ModelCache.allocate(
        model.config, batch=batch, capacity=capacity, device=embed.device, dtype=embed.dtype
    )


@torch.no_grad()
def tp_prefill(model: LingForCausalLM, prompt_ids: torch.Tensor, cache: ModelCache) -> torch.Tensor:
    """Consume prompt_ids [B, T]; returns the greedy ids [B] after the last prompt position."""
    for start in range(0, prompt_ids.shape[1], PREFILL_CHUNK_TOKENS):
        hidden = model.forward_hidden(prompt_ids[:, start : start + PREFILL_CHUNK_TOKENS], cache).final
    return greedy_tokens(model, hidden[:, -1:])[:, 0]


@torch.no_grad()
def tp_decode_step(model: LingForCausalLM, token_ids: torch.Tensor, cache: ModelCache) -> torch.Tensor:
    """token_ids [B, 1] -> next greedy ids [B]; the cache advances by one."""
    return greedy_tokens(model, model.forward_hidden(token_ids, cache).final)[:, 0]


@torch.no_grad()
def tp_generate(
    model: LingForCausalLM, prompt_ids: Sequence[int] | torch.Tensor, max_new_tokens: int
) -> list[int]:
    """Greedy decoding of one sequence on a TP model, as `generate.generate` does at TP=1.

    Args:
        prompt_ids: [T] ids, the same on every rank.
        max_new_tokens: tokens to generate (no early stop).

    Returns:
        The generated ids (identical on every rank).
    """
    device = model.model.word_embeddings.weight.device
    prompt = torch.as_tensor(prompt_ids, dtype=torch.long, device=device).reshape(1, -1)
    cache = new_tp_cache(model, prompt.shape[1] + max_new_tokens)
    token = tp_prefill(model, prompt, cache)
    tokens = [int(token.item())]
    while len(tokens) < max_new_tokens:
        token = tp_decode_step(model, token.view(1, 1), cache)
        tokens.append(int(token.item()))
    return tokens
