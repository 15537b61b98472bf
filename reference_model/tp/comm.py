"""The tensor-parallel communicator a sharded model carries: rank, group, and its two collectives.

A TP model needs exactly two kinds of collective: an all-reduce (sum) of partial hidden rows, twice
per layer, and an all-gather of (max, index) pairs for the vocabulary-parallel argmax. Which all-reduce
runs is the `fast_allreduce` switch: off = NCCL (gloo on CPU), on = the one-shot over peer memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from bubblescope.kernels.allreduce import make_all_reduce
from bubblescope.kernels.allreduce.ops import AllReduce


@dataclass
class TPComm:
    """One rank's view of the tensor-parallel group.

    Attributes:
        rank: this rank, 0 .. world_size - 1.
        world_size: ranks in the group (1 = no parallelism; no collective runs).
        device: where this rank's shard lives.
        group: the process group (None with world_size 1).
        fast_kind: the implementation `fast_allreduce` selects ("symm_one_shot" by default).
    """

    rank: int
    world_size: int
    device: torch.device
    group: dist.ProcessGroup | None = None
    fast_kind: str = "symm_one_shot"
    fast: bool = False
    _impls: dict[str, AllReduce] = field(default_factory=dict, repr=False)

    @classmethod
    def single(cls, device: torch.device | str) -> TPComm:
        """A world of one (the TP=1 baseline through the same code)."""
        return cls(rank=0, world_size=1, device=torch.device(device))

    @property
    def backend(self) -> str:
        return "none" if self.group is None else str(dist.get_backend(self.group))

    @property
    def allreduce_kind(self) -> str:
        """The all-reduce that runs now: `fast_kind` under fast_allreduce, else "nccl" (gloo on CPU)."""
        return self.fast_kind if self.fast else "nccl"

    def describe(self) -> dict[str, object]:
        """The `tp` block of a TP workload's describe(): where this rank stands, which all-reduce runs."""
        return {
            "rank": self.rank,
            "world_size": self.world_size,
            "backend": self.backend,
            "allreduce": self.allreduce_kind,
        }

    def use_fast(self, on: bool) -> None:
        """Select the all-reduce: True = `fast_kind`, False = NCCL/gloo. Makes nothing yet (lazy)."""
        self.fast = on

    def _impl(self) -> AllReduce:
        kind = self.allreduce_kind
        impl = self._impls.get(kind)
        if impl is None:
            assert self.group is not None
            impl = make_all_reduce(kind, self.group, self.device)
            self._impls[kind] = impl
        return impl

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum of `tensor` over the ranks (returns a tensor; may be the input, summed in place)."""
        if self.world_size == 1:
            return tensor
        return self._impl()(tensor)

    def all_gather(self, tensor: torch.Tensor) -> torch.Tensor:
        """Every rank's `tensor`, stacked: [world_size, *tensor.shape], rank order."""
        if self.world_size == 1:
            return tensor.unsqueeze(0)
        local = tensor.contiguous()
        # [W, *shape]
        out = local.new_empty((self.world_size, *local.shape))
        if self.backend == "gloo":
            # gloo has no all_gather_into_tensor; the list form gives the same rank order.
            dist.all_gather(list(out.unbind(0)), local, group=self.group)
        else:
            dist.all_gather_into_tensor(out, local, group=self.group)
        return out

    def barrier(self) -> None:
        if self.group is not None:
            dist.barrier(group=self.group)
