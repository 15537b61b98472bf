"""Residual-add + RMSNorm for decode: Triton kernel + plain reference."""

from bubblescope.kernels.rmsnorm.naive import add_rmsnorm_naive
from bubblescope.kernels.rmsnorm.ops import add_rmsnorm

__all__ = ["add_rmsnorm", "add_rmsnorm_naive"]
