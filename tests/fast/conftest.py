"""Fast-path tests: without CUDA, the Triton kernels run on the CPU interpreter.

TRITON_INTERPRET must be set before any `@triton.jit` kernel module is imported, hence here at
conftest import (the same arrangement as tests/kernels/conftest.py).
"""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
