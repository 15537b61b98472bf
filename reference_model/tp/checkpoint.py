"""Load a Hugging Face safetensors checkpoint into one TP rank: each rank reads only its blocks.

The rank's model is allocated at shard size (never full size, never randomly filled), then every
tensor is copied from the memory-mapped file through a safetensors slice, so only this rank's rows
or columns of a split tensor are read from disk. The split dimension comes from the sharding plan
and every stored shape is checked against it before a byte is copied (routed experts arrive per
expert, `[I, D]` / `[D, I]`, and land in views of the stacked shard).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import torch
from torch import nn

from bubblescope.errors import CheckpointError

from ..loader import StoredTensor, read_checkpoint_index
from .comm import TPComm
from .plan import sharding_plan


def allocate_shard_(model: nn.Module, comm: TPComm) -> None:
    """Replace every meta parameter of `model` by an uninitialised tensor of this rank's shard shape."""
    plan = sharding_plan(model)
    for module_name, module in model.named_modules():
        for name, meta in list(module._parameters.items()):
            if meta is None:
                continue
            qualified = f"{module_name}.{name}" if module_name else name
            shape = list(meta.shape)
            dim = plan.get(qualified)
            if dim is not None:
                shape[dim] //= comm.world_size
            local = torch.empty(shape, dtype=meta.dtype, device=comm.device)
            module._parameters[name] = nn.Parameter(local, requires_grad=False)


# Routed experts: state_dict names them per expert; the plan splits the stacked [E, ...] tensor.
_EXPERT_NAME = re.compile(r"^(?P<stack>.*\.experts)\.\d+\.(?P<proj>gate_proj|up_proj|down_proj)\.weight$")


def planned_dim(name: str, plan: dict[str, int]) -> int | None:
    """The dimension `name` (a state_dict key) is split along, from the plan; None = replicated."""
    if name in plan:
        return plan[name]
    match = _EXPERT_NAME.match(name)
    if match and f"{match['stack']}.{match['proj']}" in plan:
        return plan[f"{match['stack']}.{match['proj']}"] - 1
    return None


def _check_shape(
    name: str, stored: tuple[int, ...], local: tuple[int, ...], dim: int | None, world: int
) -> None:
    want = list(local)
    if dim is not None:
        want[dim] *= world
    if list(stored) != want:
        split = "replicated" if dim is None else f"split on dim {dim} over {world} ranks"
        held = f"rank holds {list(local)}"
        raise CheckpointError(
            f"{name}: checkpoint shape {list(stored)}, this model needs {want} ({split}; {held})"
        )


def _read_block(handle: object, entry: StoredTensor, dim: int | None, rank: int, block: int) -> torch.Tensor:
    tensor_slice = handle.get_slice(entry.stored_name)  # type: ignore[attr-defined]
    if dim is None:
        return tensor_slice[:]
    index = [slice(None)] * len(entry.shape)
    index[dim] = slice(rank * block, (rank + 1) * block)
    return tensor_slice[tuple(index)]


def load_tp_checkpoint(model: nn.Module, path: str | os.PathLike[str], comm: TPComm) -> int:
    """Copy this rank's blocks of a safetensors checkpoint into a TP model; returns bytes read.

    Args:
        model: a TP model (after `apply_tensor_parallel`), tensors allocated at shard size.
        path: folder with model.safetensors / model.safetensors.index.json, or one of those files.
        comm: this rank's communicator.

    Raises:
        CheckpointError: names missing or unexpected, shapes that are not this split, unreadable files.
    """
    from safetensors import safe_open

    stored = read_checkpoint_index(path)
    targets = model.state_dict()
    missing = sorted(set(targets) - set(stored))
    unexpected = sorted(set(stored) - set(targets))
    if missing or unexpected:
        raise CheckpointError(
            f"checkpoint {path} does not match the model: {len(missing)} missing (first: {missing[:3]}), "
            f"{len(unexpected)} unexpected (first: {unexpected[:3]})"
        )
    plan = sharding_plan(model)
    dims = {name: planned_dim(name, plan) for name in stored}
    for name, entry in stored.items():
        _check_shape(name, entry.shape, tuple(targets[name].shape), dims[name], comm.world_size)
    by_file: dict[Path, list[str]] = {}
    for name, entry in stored.items():
        by_file.setdefault(entry.file, []).append(name)
    bytes_read = 0
    for file, names in by_file.items():
        try:
            with safe_open(str(file), framework="pt", device="cpu") as handle, torch.no_grad():
                for name in names:
                    target = targets[name]
                    dim = dims[name]
                    block = target.shape[dim] if dim is not None else 0
                    source = _read_block(handle, stored[name], dim, comm.rank, block)
                    target.copy_(source)
                    bytes_read += source.numel() * source.element_size()
        except CheckpointError:
            raise
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            raise CheckpointError(
                f"{file}: failed while copying this rank's blocks ({type(exc).__name__}: {first})"
            ) from None
    return bytes_read
