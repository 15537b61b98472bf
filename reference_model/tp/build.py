"""Build one rank's shard of a randomly initialised Ling directly on the rank's device.

The full model is never resident. It is constructed on the meta device; then, module by module in the
same order `init.build_model` resets them, that module's own tensors are allocated at full size on the
rank's device, filled by the module's `reset_parameters(generator)`, cut to this rank's block and the
full tensors dropped. Peak memory is the shard plus one module's tensors (a Flash MoE layer's experts,
~6 GB bf16). Because every rank replays the same seeded random stream, rank r's block is bit-identical
to the same block of `build_model(config, device, seed=seed)`: TP=N and TP=1 run the same weights.
"""

from __future__ import annotations

import inspect
import os

import torch
from torch import nn

from bubblescope.errors import InsufficientMemoryError

from ..config import LingConfig
from ..init import default_dtype, dtype_of, free_memory_bytes, required_bytes
from ..mla import MLAAttention
from ..model import LingForCausalLM
from ..rope import InterleavedRope
from .comm import TPComm
from .parallel import apply_tensor_parallel
from .plan import ShardingError, check_divisible, shard_bytes, shard_of, sharding_plan


def can_skip_mtp() -> bool:
    """True when LingForCausalLM can be built without its MTP layer (decode never runs it)."""
    return "include_mtp" in inspect.signature(LingForCausalLM.__init__).parameters


def _construct_meta(
    config: LingConfig, dtype: torch.dtype, include_mtp: bool, **dtypes: torch.dtype
) -> LingForCausalLM:
    options: dict[str, object] = dict(dtypes)
    if can_skip_mtp():
        options["include_mtp"] = include_mtp
    elif not include_mtp:
        raise ShardingError(
            "this LingForCausalLM cannot be built without its MTP layer (no include_mtp option)"
        )
    with torch.device("meta"), default_dtype(dtype):
        return LingForCausalLM(config, **options)  # type: ignore[arg-type]


def _owns_reset(module: nn.Module) -> bool:
    # Same rule as init.build_model: torch's own layers are filled by their bubblescope parent.
    return callable(getattr(module, "reset_parameters", None)) and type(module).__module__.startswith(
        "bubblescope"
    )


def _reset_scope(module: nn.Module) -> list[tuple[nn.Module, str]]:
    """(owner, parameter name) of every tensor `module.reset_parameters` fills: its own and those of
    descendants that have no reset of their own (nn.Linear children, weight holders)."""
    owned = [(module, name) for name, tensor in module._parameters.items() if tensor is not None]
    for child in module.children():
        if not _owns_reset(child):
            owned += _reset_scope(child)
    return owned


def _check_fits(model: LingForCausalLM, comm: TPComm) -> None:
    need_bytes = required_bytes(shard_bytes(model, comm.world_size))
    free_bytes = free_memory_bytes(comm.device)
    if need_bytes > free_bytes:
        raise InsufficientMemoryError(
            f"rank {comm.rank}: the {model.config.name} shard at TP={comm.world_size} needs "
            f"~{need_bytes / 1e9:.1f} GB on {comm.device} but {free_bytes / 1e9:.1f} GB is free; "
            "use more ranks or a smaller preset"
        )


def _materialize(owner: nn.Module, name: str, device: torch.device) -> None:
    meta = owner._parameters[name]
    assert meta is not None
    owner._parameters[name] = nn.Parameter(torch.empty_like(meta, device=device), requires_grad=False)


def _shard_in_place(owner: nn.Module, name: str, qualified: str, plan: dict[str, int], comm: TPComm) -> None:
    dim = plan.get(qualified)
    if dim is None or comm.world_size == 1:
        return
    full = owner._parameters[name]
    assert full is not None
    owner._parameters[name] = nn.Parameter(
        shard_of(full.data, dim, comm.rank, comm.world_size), requires_grad=False
    )


def _rebuild_buffers(model: nn.Module, device: torch.device) -> None:
    """Recompute derived (non-checkpoint) buffers lost on the meta device: the RoPE frequencies."""
    for module in model.modules():
        if isinstance(module, MLAAttention):
            with torch.device(device):
                module.rope = InterleavedRope(module.rope_dim, module.config.rope_theta)


def _check_materialized(model: nn.Module) -> None:
    for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
        if tensor.is_meta:
            raise ShardingError(f"tensor {name} was never initialised by a reset_parameters")


def _draw_and_shard(model: LingForCausalLM, comm: TPComm, seed: int) -> None:
    """Module by module, in build_model's order: allocate full size, reset from the seeded stream, cut."""
    plan = sharding_plan(model)
    qualified = {id(p): n for n, p in model.named_parameters()}
    generator = torch.Generator(device=comm.device)
    generator.manual_seed(seed)
    for module in model.modules():
        if not _owns_reset(module):
            continue
        scope = _reset_scope(module)
        names = [qualified[id(owner._parameters[name])] for owner, name in scope]
        for owner, name in scope:
            _materialize(owner, name, comm.device)
        module.reset_parameters(generator)  # type: ignore[operator]
        for (owner, name), full_name in zip(scope, names, strict=True):
            _shard_in_place(owner, name, full_name, plan, comm)


@torch.no_grad()
def build_tp_model(
    config: LingConfig,
    comm: TPComm,
    *,
    seed: int = 0,
    router_dtype: torch.dtype = torch.float32,
    lm_head_dtype: torch.dtype = torch.float32,
    dtype: torch.dtype | None = None,
    include_mtp: bool = True,
    checkpoint: str | os.PathLike[str] | None = None,
) -> LingForCausalLM:
    """This rank's tensor-parallel shard of a random Ling (or of a checkpoint), built on comm.device.

    Args:
        config: the full (unsharded) model shape.
        comm: this rank's communicator (world_size 1 gives the whole model through the same path).
        seed, router_dtype, lm_head_dtype, dtype, include_mtp: as `init.build_model`; the same values
            give the same weights as build_model, split per `plan.sharding_plan`.
        checkpoint: a safetensors checkpoint (folder or file); the shard is then allocated empty and
            each rank reads only its blocks from disk (no random draw).

    Returns:
        The model in eval mode with TP applied (see `parallel.apply_tensor_parallel`).

    Raises:
        ShardingError: a size `comm.world_size` does not divide.
        InsufficientMemoryError: the shard does not fit on this rank's device.
    """
    check_divisible(config, comm.world_size)
    dtype = dtype or dtype_of(config)
    model = _construct_meta(
        config, dtype, include_mtp, router_dtype=router_dtype, lm_head_dtype=lm_head_dtype
    )
    _check_fits(model, comm)
    if checkpoint is not None:
        from .checkpoint import allocate_shard_, load_tp_checkpoint

        allocate_shard_(model, comm)
    else:
        _draw_and_shard(model, comm, seed)
    _rebuild_buffers(model, comm.device)
    _check_materialized(model)
    tp_model = apply_tensor_parallel(model.eval().requires_grad_(False), comm)
    if checkpoint is not None:
        load_tp_checkpoint(tp_model, checkpoint, comm)
    return tp_model
