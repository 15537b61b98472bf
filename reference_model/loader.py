"""Load a Hugging Face safetensors checkpoint into a model by its real tensor names.

Accepts a folder holding `model.safetensors` or `model.safetensors.index.json` (HF `weight_map`), or a
path to either file. Every shard header is read and checked against `model.state_dict()` before a
single weight is touched: missing, unexpected or wrongly shaped tensors are refused together in one
CheckpointError that lists the first few of each with counts, so a bad checkpoint never leaves a half
loaded model. Weights are then copied shard by shard, one tensor at a time from the memory-mapped
file, straight into the model's own tensors on their device (`copy_` casts the dtype). Only
safetensors is read: pickled formats (`.bin`, `.pt`) are refused, never unpickled.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from bubblescope.errors import CheckpointError

from .tensor_names import canonical_name

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
_PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".ckpt")
_SHOWN_PER_LIST = 5
_MAX_INDEX_BYTES = 64 << 20


@dataclass(frozen=True)
class StoredTensor:
    """Where one checkpoint tensor lives and what its header says."""

    file: Path
    stored_name: str
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class LoadReport:
    """What load_checkpoint did: tensors copied, bytes read from disk, shard files used."""

    tensors: int
    bytes_read: int
    shards: tuple[Path, ...]


def load_checkpoint(model: torch.nn.Module, path: str | os.PathLike[str]) -> LoadReport:
    """Copy a safetensors checkpoint into `model`'s parameters and buffers, in place.

    Args:
        model: a module whose state_dict keys are the HF tensor names (e.g. LingForCausalLM); its
            tensors must be materialised (not on the meta device). Dtypes and devices are kept.
        path: folder with model.safetensors / model.safetensors.index.json, or one of those files.

    Returns:
        LoadReport.

    Raises:
        CheckpointError: not safetensors, corrupt or unreadable file (named), or names/shapes that do
            not match the model (first few of each list with counts). `gate.e_score_correction_bias`
            is accepted as `gate.expert_bias`.
    """
    stored = read_checkpoint_index(path)
    targets = model.state_dict()
    check_against_model(stored, targets, source=Path(path))
    by_file: dict[Path, list[str]] = {}
    for name, entry in stored.items():
        by_file.setdefault(entry.file, []).append(name)
    bytes_read = 0
    for file, names in by_file.items():
        bytes_read += _copy_shard(file, names, stored, targets)
    return LoadReport(tensors=len(stored), bytes_read=bytes_read, shards=tuple(by_file))


def read_checkpoint_index(path: str | os.PathLike[str]) -> dict[str, StoredTensor]:
    """Read every shard header (no tensor data): canonical name -> StoredTensor.

    Raises:
        CheckpointError: missing path, pickled format, corrupt header or index, a name stored twice.
    """
    shards = _shard_files(Path(path))
    stored: dict[str, StoredTensor] = {}
    for file, wanted in shards.items():
        for stored_name, (shape, dtype) in _read_header(file, wanted).items():
            name = canonical_name(stored_name)
            if name in stored:
                first = stored[name]
                raise CheckpointError(
                    f"{name} is stored twice: as {first.stored_name} in {first.file.name} "
                    f"and as {stored_name} in {file.name}"
                )
            stored[name] = StoredTensor(file, stored_name, shape, dtype)
    return stored


def check_against_model(
    stored: dict[str, StoredTensor], targets: dict[str, torch.Tensor], *, source: Path
) -> None:
    """Refuse names or shapes that differ from the model, and targets that cannot receive data."""
    missing = [name for name in targets if name not in stored]
    unexpected = [name for name in stored if name not in targets]
    wrong_shape = [
        f"{name} {list(entry.shape)} vs model {list(targets[name].shape)}"
        for name, entry in stored.items()
        if name in targets and tuple(targets[name].shape) != entry.shape
    ]
    not_float = [
        f"{name} ({entry.dtype})"
        for name, entry in stored.items()
        if name in targets and targets[name].is_floating_point() and not _is_float_dtype(entry.dtype)
    ]
    problems = [
        _listing("missing", missing),
        _listing("unexpected", unexpected),
        _listing("wrongly shaped", wrong_shape),
        _listing("not floating point", not_float),
    ]
    problems = [text for text in problems if text]
    if problems:
        raise CheckpointError(f"checkpoint {source} does not match the model: " + "; ".join(problems))
    meta = [name for name, tensor in targets.items() if tensor.is_meta]
    if meta:
        raise CheckpointError(
            f"cannot load into meta tensors ({_listing('on meta', meta)}); build the model on a real device"
        )


def _listing(label: str, items: list[str]) -> str:
    if not items:
        return ""
    shown = ", ".join(items[:_SHOWN_PER_LIST])
    more = f", ... (+{len(items) - _SHOWN_PER_LIST} more)" if len(items) > _SHOWN_PER_LIST else ""
    return f"{len(items)} {label}: {shown}{more}"


def _is_float_dtype(safetensors_dtype: str) -> bool:
    return safetensors_dtype.upper() in {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2"}


def _shard_files(path: Path) -> dict[Path, set[str] | None]:
    """Shard file -> names the index assigns to it (None: take every tensor in the file)."""
    if not path.exists():
        raise CheckpointError(f"checkpoint not found: {path}")
    if path.is_dir():
        if (path / INDEX_FILE).is_file():
            return _read_index(path / INDEX_FILE)
        if (path / SINGLE_FILE).is_file():
            return {path / SINGLE_FILE: None}
        pickled = sorted(p.name for p in path.iterdir() if p.suffix in _PICKLE_SUFFIXES)
        found = (
            f"; found {', '.join(pickled[:3])} (pickle formats are refused, never unpickled)"
            if pickled
            else ""
        )
        raise CheckpointError(f"{path} holds neither {SINGLE_FILE} nor {INDEX_FILE}{found}")
    if path.name.endswith(".index.json"):
        return _read_index(path)
    if path.suffix == ".safetensors":
        return {path: None}
    raise CheckpointError(f"{path}: not a safetensors checkpoint (expected .safetensors or .index.json)")


def _read_index(index_path: Path) -> dict[Path, set[str] | None]:
    """Parse an HF index (`{"weight_map": {name: shard file}}`) into shard -> assigned names."""
    try:
        if index_path.stat().st_size > _MAX_INDEX_BYTES:
            raise CheckpointError(f"{index_path}: index larger than {_MAX_INDEX_BYTES >> 20} MiB")
        weight_map = json.loads(index_path.read_text(encoding="utf-8"))["weight_map"]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise CheckpointError(
            f"{index_path}: not a safetensors index ({type(exc).__name__}: {exc})"
        ) from None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise CheckpointError(f"{index_path}: weight_map must map tensor names to shard file names")
    assigned: dict[Path, set[str]] = {}
    for name, shard_name in weight_map.items():
        # Only plain file names beside the index: an index must not point elsewhere on the disk.
        if Path(shard_name).name != shard_name or not shard_name.endswith(".safetensors"):
            raise CheckpointError(
                f"{index_path}: shard {shard_name!r} for {name} is not a .safetensors file here"
            )
        assigned.setdefault(index_path.parent / shard_name, set()).add(name)
    missing_files = sorted(p.name for p in assigned if not p.is_file())
    if missing_files:
        raise CheckpointError(f"{index_path}: shard files missing: {', '.join(missing_files[:5])}")
    return {shard: names for shard, names in assigned.items()}


def _read_header(file: Path, wanted: set[str] | None) -> dict[str, tuple[tuple[int, ...], str]]:
    """Names, shapes and dtypes of one shard from its header; `wanted` must all be present."""
    from safetensors import safe_open

    try:
        with safe_open(str(file), framework="pt", device="cpu") as handle:
            keys = list(handle.keys())
            header = {}
            for key in keys if wanted is None else sorted(wanted & set(keys)):
                tensor_slice = handle.get_slice(key)
                header[key] = (tuple(tensor_slice.get_shape()), tensor_slice.get_dtype())
    except Exception as exc:  # safetensors raises its own SafetensorsError, OSError or ValueError
        raise CheckpointError(f"{file}: not a readable safetensors file ({_one_line(exc)})") from None
    if wanted is not None:
        absent = sorted(wanted - set(keys))
        if absent:
            raise CheckpointError(
                f"{file.name} lacks tensors its index assigns to it: {_listing('absent', absent)}"
            )
    return header


def _copy_shard(
    file: Path, names: list[str], stored: dict[str, StoredTensor], targets: dict[str, torch.Tensor]
) -> int:
    """Copy one shard's tensors into the model, one memory-mapped tensor at a time; returns bytes read."""
    from safetensors import safe_open

    bytes_read = 0
    try:
        with safe_open(str(file), framework="pt", device="cpu") as handle, torch.no_grad():
            for name in names:
                source = handle.get_tensor(stored[name].stored_name)
                targets[name].copy_(source)
                bytes_read += source.numel() * source.element_size()
    except Exception as exc:
        raise CheckpointError(
            f"{file}: failed while copying weights, the model is partly loaded ({_one_line(exc)})"
        ) from None
    return bytes_read


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
