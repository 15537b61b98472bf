"""What a RunRecord says about the machine and software that produced it."""

from __future__ import annotations

import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

import bubblescope

_REPO_ROOT = Path(bubblescope.__file__).resolve().parent.parent


def _stdout_of(command: list[str], timeout_s: float) -> str | None:
    """Stripped stdout of `command` when it ran and exited 0; None when it is missing, fails or hangs."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _git_sha() -> str | None:
    return _stdout_of(["git", "-C", str(_REPO_ROOT), "rev-parse", "HEAD"], timeout_s=5) or None


def _driver_version() -> str | None:
    stdout = _stdout_of(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], timeout_s=10)
    lines = (stdout or "").splitlines()
    return lines[0].strip() if lines else None


def capture_environment(device: str) -> dict[str, Any]:
    """The `environment` block of a RunRecord (schema bubblescope.run/1).

    Args:
        device: the workload's device string ("cpu", "cuda", "cuda:0").
    """
    import torch

    try:
        import triton

        triton_version: str | None = triton.__version__
    except ImportError:
        triton_version = None
    on_cuda = device.startswith("cuda") and torch.cuda.is_available()
    return {
        "tool_version": bubblescope.__version__,
        "git_sha": _git_sha(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton_version,
        "cuda": torch.version.cuda,
        "device": "cuda" if on_cuda else "cpu",
        "gpu": torch.cuda.get_device_name(torch.device(device)) if on_cuda else None,
        "driver": _driver_version() if on_cuda else None,
        "hostname": socket.gethostname(),
        "cpu_threads": torch.get_num_threads(),
    }
