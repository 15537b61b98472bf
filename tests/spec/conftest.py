"""Speculative-decoding tests: without CUDA, Triton kernels run on the CPU interpreter.

TRITON_INTERPRET must be set before any `@triton.jit` kernel module is imported, so it happens at
conftest import (pytest imports it before the test modules in this folder).
"""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture(autouse=True)
def one_cpu_thread():
    """Tiny debug-preset ops run fastest on one thread; on a shared 2-core box more threads only contend."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
