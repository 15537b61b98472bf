"""Public entry: pick an all-reduce implementation by name, behind one call signature."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist
from bubblescope.kernels.allreduce.naive import all_reduce_naive

from bubblescope.errors import BubblescopeError

# "nccl": torch.distributed.all_reduce (gloo on CPU); "symm_one_shot"/"symm_two_shot": peer memory.
ALL_REDUCE_KINDS = ("nccl", "symm_one_shot", "symm_two_shot")

AllReduce = Callable[[torch.Tensor], torch.Tensor]


class AllReduceError(BubblescopeError):
    """An unknown all-reduce kind, or one this device cannot run."""


def make_all_reduce(kind: str, group: dist.ProcessGroup, device: torch.device) -> AllReduce:
    """An all-reduce (sum) over `group`: call it with a tensor, use what it returns.

    Args:
        kind: one of ALL_REDUCE_KINDS.
        group: the tensor-parallel process group.
        device: this rank's device (symmetric-memory kinds need CUDA).

    Returns:
        f(tensor) -> summed tensor (may be the input, summed in place, or a new tensor).

    Raises:
        AllReduceError: unknown kind, or a symmetric-memory kind off CUDA.
    """
    if kind == "nccl":
        return lambda tensor: all_reduce_naive(tensor, group)
    if kind in ("symm_one_shot", "symm_two_shot"):
        if device.type != "cuda":
            raise AllReduceError(f"all-reduce {kind} needs a CUDA device; this rank is on {device}")
        from bubblescope.kernels.allreduce.symm import SymmMemAllReduce

        return SymmMemAllReduce(group, device, algorithm=kind.removeprefix("symm_"))
    raise AllReduceError(f"unknown all-reduce {kind!r}; valid: {', '.join(ALL_REDUCE_KINDS)}")
