"""Prefill and greedy token-by-token decode over a ModelCache (the plain eager loop)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .cache import ModelCache
from .model import LingForCausalLM


def new_cache(model: LingForCausalLM, capacity: int, batch: int = 1) -> ModelCache:
    """An empty cache on the model's device, in its activation dtype."""
    embed = model.model.word_embeddings.weight
    return ModelCache.allocate(
        model.config, batch=batch, capacity=capacity, device=embed.device, dtype=embed.dtype
    )


# Prompt tokens per prefill forward: bounds the naive MLA score matrix [B, H, T, S] on long prompts.
PREFILL_CHUNK_TOKENS = 2048


@torch.no_grad()
def prefill(
    model: LingForCausalLM,
    prompt_ids: torch.Tensor,
    cache: ModelCache,
    chunk_tokens: int = PREFILL_CHUNK_TOKENS,
) -> torch.Tensor:
    """Consume the prompt in forwards of up to chunk_tokens (KDA takes its chunked path for long ones).

    Args:
        prompt_ids: [B, T] token ids, T >= 1.
        cache: empty or partly filled; advanced by T.
        chunk_tokens: tokens per forward; the result does not depend on it.

    Returns:
        [B, V] fp32 logits of the last prompt position.
    """
    for start in range(0, prompt_ids.shape[1], chunk_tokens):
        logits = model(prompt_ids[:, start : start + chunk_tokens], cache)
    return logits[:, -1]


@torch.no_grad()
def decode_step(model: LingForCausalLM, token_ids: torch.Tensor, cache: ModelCache) -> torch.Tensor:
    """One decode step: token_ids [B, 1] -> [B, V] fp32 logits; the cache advances by one."""
    return model(token_ids, cache)[:, -1]


@torch.no_grad()
def generate(
    model: LingForCausalLM,
    prompt_ids: Sequence[int] | torch.Tensor,
    max_new_tokens: int,
    *,
    cache: ModelCache | None = None,
) -> list[int]:
    """Greedy decoding of one sequence (argmax; ties go to the lowest id, so runs are deterministic).

    Args:
        prompt_ids: [T] ids (list or 1-D tensor), T >= 1.
        max_new_tokens: tokens to generate (no early stop at EOS, so lengths are predictable).
        cache: reused when given (must be empty); else one of capacity T + max_new_tokens is made.

    Returns:
        The max_new_tokens generated ids.
    """
    device = model.model.word_embeddings.weight.device
    prompt = torch.as_tensor(prompt_ids, dtype=torch.long, device=device).reshape(1, -1)
    if cache is None:
        cache = new_cache(model, prompt.shape[1] + max_new_tokens)
    tokens: list[int] = []
    logits = prefill(model, prompt, cache)
    for _ in range(max_new_tokens):
        token = int(logits[0].argmax().item())
        tokens.append(token)
        if len(tokens) == max_new_tokens:
            break
        logits = decode_step(model, torch.tensor([[token]], device=device), cache)
    return tokens
