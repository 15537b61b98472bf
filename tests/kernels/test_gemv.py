"""GEMV kernel vs the naive reference (CPU interpreter here; real shapes on GPU)."""

from __future__ import annotations

import pytest
import torch
from bubblescope.kernels.gemv import GemvConfig, KernelInputError, gemv, gemv_naive

from tests.kernels.helpers import assert_close, poison


@pytest.mark.parametrize(
    ("rows", "out_features", "in_features", "w_dtype"),
    [(1, 37, 100, torch.bfloat16), (3, 20, 70, torch.float32), (16, 24, 48, torch.bfloat16)],
)
def test_gemv_matches_naive(device, rows, out_features, in_features, w_dtype):
    # Activations already in the weight dtype: tl.dot (M > 1) multiplies in the weight dtype.
    x = torch.randn(rows, in_features, device=device).to(w_dtype if rows > 1 else torch.float32)
    weight = torch.randn(out_features, in_features, device=device).to(w_dtype)
    out = poison(torch.empty(rows, out_features, device=device))
    # Small tiles so several strips and K-steps (with a ragged tail) are exercised.
    gemv(x, weight, out_dtype=torch.float32, config=GemvConfig(block_n=16, block_k=32), out=out)
    want = gemv_naive(x, weight, torch.float32)
    assert_close("gemv", out, want, atol=1e-3, rtol=1e-3)


def test_gemv_default_config_bf16_out(device):
    x = torch.randn(1, 50, device=device, dtype=torch.bfloat16)
    weight = torch.randn(9, 50, device=device, dtype=torch.bfloat16)
    got = gemv(x, weight)
    assert got.dtype == torch.bfloat16
    assert_close("gemv bf16", got, gemv_naive(x, weight), atol=3e-2, rtol=2e-2)


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "match"),
    [((17, 8), (4, 8), "1..16 rows"), ((1, 8), (4, 9), "K=8"), ((8,), (4, 8), r"\[M, K\]")],
)
def test_gemv_rejects_bad_shapes(x_shape, w_shape, match):
    with pytest.raises(KernelInputError, match=match):
        gemv(torch.randn(*x_shape), torch.randn(*w_shape))


def test_gemv_rejects_int_weight():
    with pytest.raises(KernelInputError, match="weight must be one of"):
        gemv(torch.randn(1, 8), torch.ones(4, 8, dtype=torch.int32))


def test_gemv_rejects_small_tiles_for_several_rows():
    with pytest.raises(KernelInputError, match=">= 16"):
        gemv(torch.randn(2, 32), torch.randn(8, 32), config=GemvConfig(block_n=8, block_k=32))
    with pytest.raises(KernelInputError, match="power of two"):
        gemv(torch.randn(1, 32), torch.randn(8, 32), config=GemvConfig(block_n=12, block_k=32))
