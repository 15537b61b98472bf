"""Triton kernels for batch-1 decode (installed as `bubblescope.kernels`).

Each kernel lives in its own folder: `naive.py` (plain PyTorch reference) beside the Triton file(s).
"""
