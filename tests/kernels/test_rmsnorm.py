"""Residual-add + RMSNorm kernel vs the naive reference."""

from __future__ import annotations

import pytest
import torch
from bubblescope.kernels.gemv import KernelInputError
from bubblescope.kernels.rmsnorm import add_rmsnorm, add_rmsnorm_naive

from tests.kernels.helpers import assert_close, poison


@pytest.mark.parametrize(("rows", "width", "with_residual"), [(1, 100, True), (3, 64, False)])
def test_add_rmsnorm_matches_naive(device, rows, width, with_residual):
    x = torch.randn(rows, width, device=device)
    residual = torch.randn(rows, width, device=device) if with_residual else None
    weight = torch.rand(width, device=device) + 0.5
    out = poison(torch.empty_like(x))
    res_out = poison(torch.empty_like(x))
    got, got_res = add_rmsnorm(x, residual, weight, out=out, residual_out=res_out)
    want, want_res = add_rmsnorm_naive(x, residual, weight)
    assert_close("normed", got, want, atol=1e-5, rtol=1e-5)
    assert_close("residual", got_res, want_res, atol=1e-6, rtol=1e-6)


def test_add_rmsnorm_in_place_bf16(device):
    x = torch.randn(2, 40, device=device, dtype=torch.bfloat16)
    residual = torch.randn(2, 40, device=device, dtype=torch.bfloat16)
    weight = torch.rand(40, device=device, dtype=torch.bfloat16)
    want, want_res = add_rmsnorm_naive(x, residual, weight)
    got, got_res = add_rmsnorm(x, residual, weight, residual_out=residual)
    assert got_res.data_ptr() == residual.data_ptr()
    assert_close("normed bf16", got, want, atol=2e-2, rtol=2e-2)
    # One bf16 ulp: the CPU interpreter rounds fp32 -> bf16 differently from torch.
    assert_close("residual bf16", got_res, want_res, atol=1e-2, rtol=8e-3)


def test_add_rmsnorm_rejects_mismatch():
    with pytest.raises(KernelInputError, match="weight"):
        add_rmsnorm(torch.randn(2, 8), None, torch.ones(7))
