"""Seeded random weights with trained-like scales, built directly on the target device and dtype.

`build_model` never makes a CPU copy of a large model: modules are constructed under
`torch.device(device)` with the target default dtype, then each module's `reset_parameters(generator)`
fills its own tensors from a generator living on that device. Before allocating, the bytes the model
needs are computed on the meta device and compared with what the device has free.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch

from bubblescope.errors import ConfigError, InsufficientMemoryError

from .config import PRESETS, LingConfig

if TYPE_CHECKING:
    from .model import LingForCausalLM

# Room for caches, activations and allocator slack on top of the weights.
HEADROOM_FRACTION = 0.05
HEADROOM_BYTES = 1 << 30
# Largest tensor filled by one random draw (elements); bigger stacked tensors are filled per slice.
DRAW_CHUNK_NUMEL = 1 << 26

DTYPES = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float64": torch.float64,
}


def init_normal_(
    tensor: torch.Tensor, std: float, generator: torch.Generator | None, mean: float = 0.0
) -> None:
    """Fill `tensor` in place with N(mean, std), drawn on the tensor's device (fp32 draw, then cast)."""
    # Stacked experts of a large preset are GBs: draw slice by slice so the fp32 scratch stays small.
    slices = tensor.unbind(0) if tensor.dim() > 2 and tensor.numel() > DRAW_CHUNK_NUMEL else (tensor,)
    with torch.no_grad():
        for part in slices:
            draw = torch.randn(part.shape, generator=generator, device=part.device, dtype=torch.float32)
            part.copy_(draw * std + mean)


def init_linear_(weight: torch.Tensor, generator: torch.Generator | None, gain: float = 1.0) -> None:
    """Variance-preserving init for a [out, in] (or stacked [E, out, in]) weight: std = gain / sqrt(in)."""
    init_normal_(weight, gain / math.sqrt(weight.shape[-1]), generator)


def residual_gain(config: LingConfig) -> float:
    """Gain for projections that write into the residual stream, so its scale stays O(1) over depth."""
    return 1.0 / math.sqrt(2.0 * (config.num_hidden_layers + 1))


def dtype_of(config: LingConfig) -> torch.dtype:
    return DTYPES[config.dtype]


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """Construct modules in `dtype` without threading a dtype argument through every constructor."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def _construct(
    config: LingConfig, device: torch.device | str, dtype: torch.dtype, **options: Any
) -> LingForCausalLM:
    from .model import LingForCausalLM

    with torch.device(device), default_dtype(dtype):
        return LingForCausalLM(config, **options)


def estimate_model_bytes(
    config: LingConfig,
    *,
    dtype: torch.dtype | None = None,
    router_dtype: torch.dtype = torch.float32,
    lm_head_dtype: torch.dtype = torch.float32,
    include_mtp: bool = True,
) -> int:
    """Bytes of all parameters and buffers, computed from a meta-device model (allocates nothing)."""
    dtypes = {"router_dtype": router_dtype, "lm_head_dtype": lm_head_dtype}
    model = _construct(config, "meta", dtype or dtype_of(config), include_mtp=include_mtp, **dtypes)
    tensors = list(model.parameters()) + list(model.buffers())
    return sum(t.numel() * t.element_size() for t in tensors)


def free_memory_bytes(device: torch.device) -> int:
    """Free device memory (CUDA) or available host RAM (CPU), in bytes."""
    if device.type == "cuda":
        free_bytes, _total = torch.cuda.mem_get_info(device)
        return int(free_bytes)
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def resolve_device(device: torch.device | str) -> torch.device:
    """A concrete device (cuda -> cuda:<current>), or ConfigError when it does not exist here."""
    try:
        device = torch.device(device)
    except RuntimeError as exc:
        raise ConfigError(f"bad device {device!r}: {exc}") from None
    if device.type == "cpu":
        return device
    if device.type != "cuda" or not torch.cuda.is_available():
        raise ConfigError(
            f"device {device} is not available here (CUDA available: {torch.cuda.is_available()})"
        )
    index = torch.cuda.current_device() if device.index is None else device.index
    if index >= torch.cuda.device_count():
        raise ConfigError(
            f"device cuda:{index} does not exist; this machine has {torch.cuda.device_count()} GPUs"
        )
    return torch.device("cuda", index)


def required_bytes(weight_bytes: int) -> int:
    return int(weight_bytes * (1 + HEADROOM_FRACTION)) + HEADROOM_BYTES


def check_fits(config: LingConfig, device: torch.device, **options: Any) -> None:
    """Raise InsufficientMemoryError naming the largest preset that fits, when `config` does not."""
    need_bytes = required_bytes(estimate_model_bytes(config, **options))
    free_bytes = free_memory_bytes(device)
    if need_bytes <= free_bytes:
        return
    fitting = []
    for preset in PRESETS.values():
        preset_bytes = required_bytes(estimate_model_bytes(preset))
        if preset_bytes <= free_bytes:
            fitting.append((preset_bytes, preset.name))
    advice = f"try --preset {max(fitting)[1]}" if fitting else "no preset fits; free some memory"
    raise InsufficientMemoryError(
        f"preset {config.name} needs ~{need_bytes / 1e9:.1f} GB on {device} but only "
        f"{free_bytes / 1e9:.1f} GB is free; {advice}"
    )


def build_model(
    config: LingConfig,
    device: torch.device | str,
    *,
    seed: int = 0,
    router_dtype: torch.dtype = torch.float32,
    lm_head_dtype: torch.dtype = torch.float32,
    dtype: torch.dtype | None = None,
    include_mtp: bool = True,
) -> LingForCausalLM:
    """A randomly initialised LingForCausalLM, made directly on `device`.

    Args:
        config: model shape (a preset or a variant).
        device: where to allocate ("cpu", "cuda", "cuda:1", ...).
        seed: same seed, same device -> same weights.
        router_dtype: dtype of every MoE router weight (fp32 baseline; bf16 for the `bf16_gate` switch).
        lm_head_dtype: dtype of lm_head (fp32 baseline; bf16 for `bf16_lm_head`).
        dtype: all other weights; defaults to config.dtype.
        include_mtp: build the MTP layer (when the config has one).

    Returns:
        The model in eval mode, gradients off.

    Raises:
        ConfigError: the device does not exist on this machine.
        InsufficientMemoryError: the model does not fit; the message names a preset that does.
    """
    device = resolve_device(device)
    dtype = dtype or dtype_of(config)
    options = {"router_dtype": router_dtype, "lm_head_dtype": lm_head_dtype, "include_mtp": include_mtp}
    check_fits(config, device, dtype=dtype, **options)
    model = _construct(config, device, dtype, **options)
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            reset = getattr(module, "reset_parameters", None)
            # torch's own layers take no generator; every bubblescope module resets its direct tensors.
            if reset is not None and type(module).__module__.startswith("bubblescope"):
                reset(generator)
    return model.eval().requires_grad_(False)
