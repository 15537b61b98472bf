"""Shared test setup: GPU tests skip cleanly without CUDA; shared/ data skips cleanly when absent."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DIR = REPO_ROOT.parent / "shared"

# Triton reads TRITON_INTERPRET when a kernel module is first imported, and any test module may import
# kernels; so decide once, before collection, for the whole session. Without a GPU every Triton kernel
# runs in the interpreter (CPU, small shapes).
if shutil.which("nvidia-smi") is None and not os.environ.get("CUDA_VISIBLE_DEVICES"):
    os.environ.setdefault("TRITON_INTERPRET", "1")


def _cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture
def shared_dir() -> Path:
    """The read-only ../shared folder beside the checkout; tests using it skip when it is absent."""
    if not SHARED_DIR.is_dir():
        pytest.skip("../shared is not present beside the checkout")
    return SHARED_DIR
