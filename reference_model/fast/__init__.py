"""The fast batch-1 decode path: packed weights, Triton kernels, one CUDA graph per step, switches."""

from bubblescope.reference_model.fast.decoder import FastDecoder

__all__ = ["FastDecoder"]
