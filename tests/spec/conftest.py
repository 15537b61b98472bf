"""Speculative-decoding tests: without CUDA, Triton kernels run on the CPU interpreter.

TRITON_INTERPRET must be set before any `@triton.jit` kernel module is imported, so it happens at
conftest import (pytest imports it before the test modules in this folder).
"""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
