"""Ling-3.0-flash reference decoder (installed as `bubblescope.reference_model`).

Plain PyTorch that reads like the spec in `shared/notes/ling3_flash.md`; the fast path swaps in
Triton kernels and CUDA graphs by switches. Knows nothing of bubblescope except the workload protocol.
"""
