"""Comparison helpers for kernel tests."""

from __future__ import annotations

import torch


def assert_close(name: str, got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> None:
    """torch.testing-style check whose message carries max abs diff and max relative error."""
    got64, want64 = got.detach().double().cpu(), want.detach().double().cpu()
    assert got64.shape == want64.shape, f"{name}: shape {tuple(got64.shape)} != {tuple(want64.shape)}"
    assert not torch.isnan(got64).any(), f"{name}: output has NaN (poisoned slots left unwritten?)"
    diff = (got64 - want64).abs()
    rel = diff / want64.abs().clamp_min(1e-6)
    bad = diff > atol + rtol * want64.abs()
    assert not bad.any(), (
        f"{name}: {int(bad.sum())}/{diff.numel()} elements off; max abs diff {diff.max().item():.3e}, "
        f"max rel err {rel.max().item():.3e} (atol {atol}, rtol {rtol})"
    )


def poison(tensor: torch.Tensor) -> torch.Tensor:
    """Fill a float output with NaN (ints with -1) so unwritten slots fail the comparison."""
    return tensor.fill_(float("nan") if tensor.is_floating_point() else -1)
