"""Write a model (or a state_dict) as a sharded Hugging Face safetensors checkpoint with an index.

The layout is what HF tools write and `loader.load_checkpoint` reads: `model-0000i-of-0000N.safetensors`
shards and `model.safetensors.index.json` (`{"metadata": {"total_size": bytes}, "weight_map": {...}}`).
Tests build small checkpoints with it, and users can turn a seeded random model into a checkpoint.
Each shard and the index are written through a temporary file and an atomic rename, the index last,
so a reader never finds an index naming a missing or half-written shard.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import torch

from bubblescope.errors import CheckpointError
from bubblescope.files.atomic import write_json_atomic

from .loader import INDEX_FILE

DEFAULT_MAX_SHARD_BYTES = 5 << 30


def write_synthetic_checkpoint(
    model_or_state_dict: torch.nn.Module | Mapping[str, torch.Tensor],
    folder: str | os.PathLike[str],
    *,
    max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES,
) -> Path:
    """Save tensors as safetensors shards of at most `max_shard_bytes` each, plus the index json.

    Args:
        model_or_state_dict: a module (its state_dict is saved) or a name -> tensor mapping. Tensors
            keep their dtype; they are moved to the host one shard at a time.
        folder: created if absent; existing shards of the same names are replaced.
        max_shard_bytes: shard size limit; a tensor larger than it gets a shard of its own.

    Returns:
        Path of the written `model.safetensors.index.json`.

    Raises:
        CheckpointError: nothing to write, a meta tensor, or a non-positive shard size.
    """
    if max_shard_bytes <= 0:
        raise CheckpointError(f"max_shard_bytes must be > 0, got {max_shard_bytes}")
    if isinstance(model_or_state_dict, torch.nn.Module):
        tensors: Mapping[str, torch.Tensor] = model_or_state_dict.state_dict()
    else:
        tensors = model_or_state_dict
    if not tensors:
        raise CheckpointError("nothing to write: the state_dict is empty")
    meta = [name for name, tensor in tensors.items() if tensor.is_meta]
    if meta:
        raise CheckpointError(
            f"cannot write meta tensors ({len(meta)}, e.g. {meta[0]}); materialise the model first"
        )
    groups = plan_shards({name: _nbytes(tensor) for name, tensor in tensors.items()}, max_shard_bytes)
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    weight_map: dict[str, str] = {}
    for number, names in enumerate(groups, start=1):
        shard_name = f"model-{number:05d}-of-{len(groups):05d}.safetensors"
        _write_shard(target / shard_name, {name: tensors[name] for name in names})
        weight_map.update(dict.fromkeys(names, shard_name))
    total_size = sum(_nbytes(tensor) for tensor in tensors.values())
    index = {"metadata": {"total_size": total_size}, "weight_map": weight_map}
    return write_json_atomic(target / INDEX_FILE, index)


def plan_shards(sizes_bytes: Mapping[str, int], max_shard_bytes: int) -> list[list[str]]:
    """Group names in order into shards whose byte sums stay within `max_shard_bytes`.

    A tensor larger than the limit is a shard of its own; no shard is ever empty.
    """
    groups: list[list[str]] = []
    current: list[str] = []
    current_bytes = 0
    for name, size in sizes_bytes.items():
        if current and current_bytes + size > max_shard_bytes:
            groups.append(current)
            current, current_bytes = [], 0
        current.append(name)
        current_bytes += size
    if current:
        groups.append(current)
    return groups


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def _write_shard(path: Path, tensors: Mapping[str, torch.Tensor]) -> None:
    from safetensors.torch import save_file

    # safetensors refuses views and tensors sharing storage; an owned contiguous host copy is safe.
    host = {name: _owned_host_copy(tensor) for name, tensor in tensors.items()}
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        save_file(host, tmp_name, metadata={"format": "pt"})
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def _owned_host_copy(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().to("cpu", copy=True).contiguous()
