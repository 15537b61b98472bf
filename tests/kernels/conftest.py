"""Kernel tests: without CUDA, run Triton kernels on the CPU interpreter.

TRITON_INTERPRET must be set before any `@triton.jit` kernel module is imported, which is why it
happens here at conftest import (pytest imports it before the test modules in this folder).
"""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
