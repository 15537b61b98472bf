"""Decode GEMV (1..16 rows of activations against an nn.Linear weight): Triton kernel + reference."""

from bubblescope.kernels.gemv.checks import KernelInputError
from bubblescope.kernels.gemv.naive import gemv_naive
from bubblescope.kernels.gemv.ops import GemvConfig, choose_config, gemv

__all__ = ["GemvConfig", "KernelInputError", "choose_config", "gemv", "gemv_naive"]
