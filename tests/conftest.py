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
    """gpu tests skip without CUDA; on a CUDA machine the tests that describe a CPU run skip, and so do
    the Triton-interpreter tests (their CUDA counterparts are the gpu tests), so the whole suite passes
    on either kind of machine."""
    cuda = _cuda_available()
    interpreting = os.environ.get("TRITON_INTERPRET") == "1"
    skips = {
        "gpu": (not cuda, "needs a CUDA device"),
        "cpu_only": (cuda, "describes a CPU run; this machine has CUDA, so the run would take the GPU"),
        "interpreter": (not interpreting, "Triton interpreter test; the gpu tests cover CUDA"),
    }
    for item in items:
        for marker, (skip, reason) in skips.items():
            if skip and marker in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def shared_dir() -> Path:
    """The read-only ../shared folder beside the checkout; tests using it skip when it is absent."""
    if not SHARED_DIR.is_dir():
        pytest.skip("../shared is not present beside the checkout")
    return SHARED_DIR
