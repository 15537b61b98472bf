"""Residual-add + RMSNorm for decode: Triton kernel, the producer-epilogue variant, plain reference."""

from bubblescope.kernels.rmsnorm.epilogue import NormEpilogue
from bubblescope.kernels.rmsnorm.naive import add_rmsnorm_naive, epilogue_add_rmsnorm_naive
from bubblescope.kernels.rmsnorm.ops import add_rmsnorm

__all__ = ["NormEpilogue", "add_rmsnorm", "add_rmsnorm_naive", "epilogue_add_rmsnorm_naive"]
