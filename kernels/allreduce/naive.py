"""The plain-PyTorch all-reduce: `torch.distributed.all_reduce` (NCCL on CUDA, gloo on CPU)."""

from __future__ import annotations

import torch
import torch.distributed as dist


def all_reduce_naive(tensor: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """Sum `tensor` over the ranks of `group`, in place, and return it.

    Args:
        tensor: any shape; the same shape and dtype on every rank.
        group: the tensor-parallel group (None = the default group).

    Returns:
        `tensor`, now holding the sum of every rank's values (identical bits on every rank).
    """
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    return tensor
