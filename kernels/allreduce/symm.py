"""One-shot (and two-shot) all-reduce over peer memory from PyTorch symmetric memory, no multicast.

Each rank copies its partial sum into its own symmetric buffer; the one-shot kernel then reads every
peer's buffer over NVLink (plain loads through peer mappings, not NVLS multicast) and sums them, so
one small all-reduce is one kernel with a device-side barrier instead of NCCL's protocol steps.

Buffers are symmetric allocations: every rank must allocate the same (shape, dtype) in the same order
and rendezvous them, which is a collective. So a buffer is made the first time a shape is seen
outside CUDA-graph capture (a warm-up eager step does it on every rank in lockstep); meeting a new
shape while capturing is an error, not a hang.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from bubblescope.errors import BubblescopeError

# Above this size one-shot reads (world - 1) peer copies per rank and stops paying; NCCL takes it.
ONE_SHOT_MAX_BYTES = 256 * 1024


class SymmMemError(BubblescopeError):
    """Symmetric memory is unavailable here, or a buffer would have to be made during graph capture."""


def _symm_mem() -> Any:
    try:
        import torch.distributed._symmetric_memory as symm_mem
    except ImportError as exc:
        raise SymmMemError(f"torch.distributed._symmetric_memory is not available: {exc}") from None
    return symm_mem


class SymmMemAllReduce:
    """Sum over a process group through symmetric-memory buffers (one per distinct shape and dtype).

    Args:
        group: the tensor-parallel process group (NCCL, CUDA devices).
        device: this rank's CUDA device.
        algorithm: "one_shot" (every rank reads all peers) or "two_shot" (reduce-scatter + all-gather).
        max_bytes: tensors larger than this fall back to NCCL.
    """

    def __init__(
        self,
        group: dist.ProcessGroup,
        device: torch.device,
        algorithm: str = "one_shot",
        max_bytes: int = ONE_SHOT_MAX_BYTES,
    ) -> None:
        if device.type != "cuda":
            raise SymmMemError(f"symmetric-memory all-reduce needs CUDA tensors; this rank is on {device}")
        if algorithm not in ("one_shot", "two_shot"):
            raise SymmMemError(f"unknown symmetric-memory algorithm {algorithm!r}; use one_shot or two_shot")
        self.group = group
        self.group_name = group.group_name
        self.device = device
        self.algorithm = algorithm
        self.max_bytes = max_bytes
        self._buffers: dict[tuple[tuple[int, ...], torch.dtype], torch.Tensor] = {}
        symm_mem = _symm_mem()
        enable = getattr(symm_mem, "enable_symm_mem_for_group", None)
        # Deprecated (a no-op) in recent torch, required in older releases.
        if enable is not None:
            enable(self.group_name)

    def buffer_for(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """The rendezvoused symmetric buffer for (shape, dtype), made now if new (a collective)."""
        key = (tuple(shape), dtype)
        buffer = self._buffers.get(key)
        if buffer is not None:
            return buffer
        if torch.cuda.is_current_stream_capturing():
            raise SymmMemError(
                f"fast all-reduce met a new shape {list(shape)} {dtype} during CUDA-graph capture; "
                "run one eager step before capturing so every rank makes its buffer"
            )
        symm_mem = _symm_mem()
        buffer = symm_mem.empty(*shape, dtype=dtype, device=self.device)
        symm_mem.rendezvous(buffer, self.group_name)
        self._buffers[key] = buffer
        return buffer

    def handles(self, tensor: torch.Tensor) -> bool:
        """True when this implementation takes `tensor` (CUDA, contiguous, float, small enough)."""
        return (
            tensor.is_cuda
            and tensor.dtype in (torch.bfloat16, torch.float16, torch.float32)
            and tensor.numel() * tensor.element_size() <= self.max_bytes
        )

    def __call__(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum `tensor` over the group; returns a new tensor (the input is left as it was).

        Args:
            tensor: the same shape and dtype on every rank.

        Returns:
            The sum, same shape and dtype; bigger or non-float inputs go through NCCL in place.
        """
        if not self.handles(tensor):
            dist.all_reduce(tensor, group=self.group)
            return tensor
        local = tensor.contiguous()
        buffer = self.buffer_for(tuple(local.shape), local.dtype)
        if self.algorithm == "one_shot":
            # The fused copy+reduce op is newer than one_shot_all_reduce; older builds copy first.
            if hasattr(torch.ops.symm_mem, "one_shot_all_reduce_copy"):
                return torch.ops.symm_mem.one_shot_all_reduce_copy(buffer, local, "sum", self.group_name)
            buffer.copy_(local)
            return torch.ops.symm_mem.one_shot_all_reduce(buffer, "sum", self.group_name)
        buffer.copy_(local)
        torch.ops.symm_mem.two_shot_all_reduce_(buffer, "sum", self.group_name)
        return buffer.clone()
