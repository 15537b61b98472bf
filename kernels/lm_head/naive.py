"""Plain PyTorch lm_head + greedy argmax reference (fp32, a row at a time)."""

from __future__ import annotations

import torch


def lm_head_greedy_naive(x: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """logits = x @ weight^T in fp32; token = argmax (first index on ties, like torch.argmax).

    Args:
        x: `[M, K]` final-normed hidden rows; weight: `[N, K]` (vocab rows).
    Returns:
        (tokens `[M]` int64, logits `[M, N]` fp32).
    """
    logits = torch.empty(x.shape[0], weight.shape[0], dtype=torch.float32, device=x.device)
    tokens = torch.empty(x.shape[0], dtype=torch.int64, device=x.device)
    for m in range(x.shape[0]):
        logits[m] = weight.float() @ x[m].float()
        best = logits[m].max()
        # First index holding the maximum.
        tokens[m] = torch.nonzero(logits[m] == best)[0, 0]
    return tokens, logits
