"""Vocabulary-parallel lm_head: each rank scores its block of the vocabulary; argmax across ranks on device.

Rank r holds lm_head rows r*V/TP .. (r+1)*V/TP - 1. Each rank takes its local (max logit, global index)
pair, one all-gather shares the pairs, and every rank picks the same winner: the largest logit, ties to
the lowest global index — exactly what torch.argmax over the full row returns (its first maximum), since
ranks own increasing index blocks and each local argmax already returns its first maximum.
"""

from __future__ import annotations

import torch

from ..model import LingForCausalLM
from .comm import TPComm


def vocab_parallel_argmax(local_logits: torch.Tensor, vocab_start: int, comm: TPComm) -> torch.Tensor:
    """Global greedy ids from each rank's slice of the logits, without a host read.

    Args:
        local_logits: [..., V / TP] this rank's logits (fp32 or fp64).
        vocab_start: global id of this rank's first vocabulary row.
        comm: the communicator (one all-gather of 2 fp64 per row).

    Returns:
        [...] int64 global token ids, identical on every rank.
    """
    local_index = local_logits.argmax(dim=-1)
    local_max = local_logits.gather(-1, local_index.unsqueeze(-1)).squeeze(-1)
    # fp64 holds any fp32 logit and any vocabulary index exactly: one message per row. [..., 2]
    pairs = torch.stack((local_max.double(), (local_index + vocab_start).double()), dim=-1)
    # [W, ..., 2]
    gathered = comm.all_gather(pairs)
    values, indices = gathered[..., 0], gathered[..., 1]
    best = values.max(dim=0, keepdim=True).values
    # argmax over a 0/1 mask returns the first (lowest) rank holding the best value.
    winner = (values == best).to(torch.int8).argmax(dim=0, keepdim=True)
    return indices.gather(0, winner).squeeze(0).to(torch.int64)


def local_logits(model: LingForCausalLM, final_hidden: torch.Tensor) -> torch.Tensor:
    """final_hidden [B, T, D] -> this rank's logits [B, T, V / TP] fp32 (no communication)."""
    return LingForCausalLM.compute_logits(model, final_hidden)


def gather_vocab(local: torch.Tensor, comm: TPComm) -> torch.Tensor:
    """Every rank's vocabulary slice joined in rank order: [..., V / TP] -> [..., V] (one all-gather)."""
    if comm.world_size == 1:
        return local
    # [W, ..., V / TP] -> [..., W, V / TP] -> [..., V]
    return comm.all_gather(local).movedim(0, -2).flatten(-2)


def greedy_tokens(model: LingForCausalLM, final_hidden: torch.Tensor) -> torch.Tensor:
    """final_hidden [B, T, D] -> greedy ids [B, T] over the full vocabulary (works at TP=1 too)."""
    local = local_logits(model, final_hidden)
    comm: TPComm | None = getattr(model, "tp", None)
    if comm is None or comm.world_size == 1:
        return local.argmax(dim=-1)
    vocab_start: int = getattr(model, "vocab_start", 0)
    return vocab_parallel_argmax(local, vocab_start, comm)
