"""The one-launch MLA prologue matches the plain PyTorch math (interpreter on the CPU, real GPU too)."""

from __future__ import annotations

import pytest
import torch
from bubblescope.reference_model.fast.mla_prep import MLAPrepInputError, mla_prep, mla_prep_reference


def make_inputs(heads: int, nope: int, rope: int, latent_dim: int, dtype: torch.dtype, device: str):
    generator = torch.Generator().manual_seed(heads * 100 + rope)
    # [H, nope + rope] fp32 projection rows (the fast path passes the fp32 GEMV output)
    q = torch.randn(heads, nope + rope, generator=generator).to(device)
    latent = torch.randn(latent_dim + rope, generator=generator).to(device)
    weight = (1 + 0.1 * torch.randn(latent_dim, generator=generator)).to(device=device, dtype=dtype)
    angles = 7.0 * torch.rand(1, rope // 2, generator=generator)
    cos, sin = angles.cos().to(device), angles.sin().to(device)
    cache = torch.full((1, 12, latent_dim + rope), float("nan"), dtype=dtype, device=device)
    return q, latent, weight, cos, sin, cache


@pytest.mark.parametrize(
    ("heads", "nope", "rope", "latent_dim", "dtype"),
    [(4, 16, 8, 32, torch.float32), (3, 12, 6, 40, torch.float32), (2, 16, 8, 24, torch.bfloat16)],
)
def test_mla_prep_matches_reference(heads, nope, rope, latent_dim, dtype) -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    q, latent, weight, cos, sin, cache = make_inputs(heads, nope, rope, latent_dim, dtype, device)
    positions = torch.tensor([5], device=device)
    expected_cache = cache.clone()
    expected = mla_prep_reference(q, latent, weight, cos, sin, positions, expected_cache, 1e-6)
    got = mla_prep(q, latent, weight, cos, sin, positions, cache, 1e-6)
    # fp32: summation-order noise; bf16: one rounding step (2^-8 relative) of the largest value.
    scale = max(expected.float().abs().max().item(), expected_cache[0, 5].float().abs().max().item())
    tol = (1e-6 if dtype == torch.float32 else 2.0**-7) * scale
    q_err = (got.float() - expected.float()).abs().max().item()
    row_err = (cache[0, 5].float() - expected_cache[0, 5].float()).abs().max().item()
    assert q_err <= tol and row_err <= tol, f"max abs diff q_pe {q_err:.2e}, cache row {row_err:.2e}"
    # Only the row at the position is written; NaN-poisoned neighbours stay untouched.
    assert torch.isnan(cache[0, 4].float()).all() and torch.isnan(cache[0, 6].float()).all()


def test_mla_prep_rejects_bad_shapes() -> None:
    q, latent, weight, cos, sin, cache = make_inputs(2, 16, 8, 32, torch.float32, "cpu")
    with pytest.raises(MLAPrepInputError, match="mla_prep: need"):
        mla_prep(q, latent[:-1], weight, cos, sin, torch.tensor([0]), cache, 1e-6)
