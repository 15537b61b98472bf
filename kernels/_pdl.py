"""Programmatic Dependent Launch (PDL) helpers shared by every decode kernel.

PDL lets kernel N+1 start its prologue (loading weights, which never depend on kernel N) while
kernel N finishes; `gdc_wait()` then blocks only until kernel N's results are visible. It needs
compute capability >= 9.0 and a real GPU: under TRITON_INTERPRET=1 (CPU tests) `gdc_wait()` raises,
so kernels keep every PDL call behind a `USE_PDL: tl.constexpr` that this module sets to False there.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl


def is_interpreting() -> bool:
    """True when Triton runs kernels on the CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "yes", "on")


def pdl_supported(device: torch.device) -> bool:
    """PDL works on CUDA devices of compute capability >= 9.0 (Hopper), never in the interpreter."""
    if is_interpreting() or device.type != "cuda" or not torch.cuda.is_available():
        return False
    return torch.cuda.get_device_capability(device) >= (9, 0)


def resolve_pdl(use_pdl: bool, device: torch.device) -> bool:
    """The USE_PDL constexpr a launcher passes: the caller's wish, and only where PDL can run."""
    return bool(use_pdl) and pdl_supported(device)


def launch_options(use_pdl: bool) -> dict[str, bool]:
    """Extra `kernel[grid](...)` keywords: `launch_pdl=True` only when PDL is on (resolved already)."""
    return {"launch_pdl": True} if use_pdl else {}


@triton.jit
def pdl_wait(USE_PDL: tl.constexpr):
    """Block until the previous kernel's writes are visible (no-op without PDL)."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()


@triton.jit
def pdl_launch_dependents(USE_PDL: tl.constexpr):
    """Let the next kernel in the stream start its prologue now (no-op without PDL)."""
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
