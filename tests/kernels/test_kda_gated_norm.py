"""kernels/kda_verify/gated_norm.py (the `verify_gated_norm` switch) against its PyTorch reference."""

from __future__ import annotations

import pytest
import torch
from bubblescope.kernels.kda_verify.common import KDAVerifyInputError
from bubblescope.kernels.kda_verify.gated_norm import gated_rms_norm_rows
from bubblescope.kernels.kda_verify.naive import gated_rms_norm_naive
from bubblescope.reference_model.kda import gated_rms_norm

from tests.kernels.helpers import assert_close


# [B, T, H, V]: a verify window of 10 tokens (rows not a multiple of the 8 per program: 3 heads), a
# V that is not a power of two, bf16 on the GPU (the interpreter's bf16 math is trusted for loads only).
@pytest.mark.parametrize(
    ("shape", "dtype", "tol"),
    [((1, 10, 3, 16), torch.float32, 1e-5), ((1, 3, 4, 24), torch.float32, 1e-5),
     pytest.param((1, 10, 32, 128), torch.bfloat16, 8e-3, marks=pytest.mark.gpu)],
    ids=["10x3x16-fp32", "3x4x24-fp32", "e256-bf16"],
)  # fmt: skip
def test_gated_norm_matches_the_reference(device, shape, dtype, tol):
    o = (torch.randn(shape, device=device) * 3).to(dtype)
    gate = torch.randn(shape, device=device).to(dtype)
    weight = (torch.rand(shape[-1], device=device) + 0.5).to(dtype)
    want = gated_rms_norm_naive(o, gate, weight, 1e-6)
    # The decoder's eager path is the same math.
    assert torch.equal(want, gated_rms_norm(o, gate, weight, 1e-6))
    for pdl in (False, True):
        got = gated_rms_norm_rows(o, gate, weight, 1e-6, use_pdl=pdl)
        assert got.shape == o.shape and got.dtype == o.dtype
        assert_close(f"gated norm {shape} {dtype} pdl={pdl}", got.float(), want.float(), atol=tol, rtol=tol)
    # The bound can fail: without the gate the rows are far off.
    ungated = gated_rms_norm_naive(o, torch.full_like(gate, 30.0), weight, 1e-6)
    assert (ungated.float() - want.float()).abs().max() > 10 * tol


def test_gated_norm_refuses_mismatched_shapes(device):
    o = torch.randn(1, 2, 3, 8, device=device)
    with pytest.raises(KDAVerifyInputError, match="must match"):
        gated_rms_norm_rows(o, torch.randn(1, 2, 3, 4, device=device), torch.ones(8, device=device), 1e-6)
    with pytest.raises(KDAVerifyInputError, match="weight must be"):
        gated_rms_norm_rows(o, torch.randn_like(o), torch.ones(4, device=device), 1e-6)
