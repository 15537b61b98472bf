"""Input checks shared by the decode kernels: one-line errors instead of Triton tracebacks."""

from __future__ import annotations

import torch

from bubblescope.errors import BubblescopeError

FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


class KernelInputError(BubblescopeError):
    """A decode kernel was called with tensors of the wrong shape, dtype, device or layout."""


def check_shape(name: str, tensor: torch.Tensor, shape: tuple[int, ...], op: str) -> None:
    """Raise unless `tensor.shape == shape`; -1 in `shape` matches any size."""
    ok = tensor.dim() == len(shape) and all(
        want in (-1, got) for want, got in zip(shape, tensor.shape, strict=False)
    )
    if not ok:
        want = "[" + ", ".join("*" if s == -1 else str(s) for s in shape) + "]"
        raise KernelInputError(f"{op}: {name} must have shape {want}; got {list(tensor.shape)}")


def check_dtype(name: str, tensor: torch.Tensor, dtypes: tuple[torch.dtype, ...], op: str) -> None:
    if tensor.dtype not in dtypes:
        allowed = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise KernelInputError(
            f"{op}: {name} must be one of {allowed}; got {str(tensor.dtype).replace('torch.', '')}"
        )


def check_same_device(op: str, **tensors: torch.Tensor) -> torch.device:
    """All tensors on one device; returns it."""
    devices = {str(t.device) for t in tensors.values()}
    if len(devices) != 1:
        listed = ", ".join(f"{name} on {t.device}" for name, t in tensors.items())
        raise KernelInputError(f"{op}: all tensors must be on one device; got {listed}")
    return next(iter(tensors.values())).device


def check_contiguous(op: str, **tensors: torch.Tensor) -> None:
    for name, tensor in tensors.items():
        if not tensor.is_contiguous():
            raise KernelInputError(f"{op}: {name} must be contiguous (call .contiguous() first)")


def check_powers_of_two(op: str, config: object, names: tuple[str, ...]) -> None:
    """Raise unless each named field of a tile config is a power of two (Triton block sizes)."""
    for name in names:
        size = getattr(config, name)
        if size < 1 or size & (size - 1):
            raise KernelInputError(f"{op}: {type(config).__name__}.{name} must be a power of two; got {size}")
