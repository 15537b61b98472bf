"""GEMV kernel vs the naive reference (CPU interpreter here; real shapes on GPU)."""

from __future__ import annotations

import pytest
import torch
from bubblescope.kernels.gemv import GemvConfig, KernelInputError, gemv, gemv_naive
from bubblescope.kernels.gemv.ops import choose_config

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


@pytest.mark.parametrize(
    "config",
    [
        GemvConfig(block_n=1, block_k=32, acc_2d=True),
        GemvConfig(block_n=2, block_k=64, acc_2d=False, evict_first=True),
        GemvConfig(block_n=4, block_k=16, acc_2d=True, pdl_trigger=2),
        # Two tiles in flight: 75 columns = 5 tiles of 16, so the last pair is half past K.
        GemvConfig(block_n=4, block_k=16, pairs=True),
        GemvConfig(block_n=2, block_k=128, pairs=True),
    ],
)
def test_gemv_single_row_variants_match_naive(device, config):
    """Narrow strips, both M == 1 accumulation schemes and the L2 hint give the same product."""
    x = torch.randn(1, 75, device=device)
    weight = torch.randn(13, 75, device=device).to(torch.bfloat16)
    out = poison(torch.empty(1, 13, device=device))
    gemv(x, weight, out_dtype=torch.float32, config=config, out=out)
    assert_close(f"gemv {config}", out, gemv_naive(x, weight, torch.float32), atol=1e-3, rtol=1e-3)


def test_choose_config_keeps_enough_programs():
    for out_features, block_n in ((4096, 8), (2560, 2), (1536, 2), (512, 1), (100, 1)):
        assert choose_config(1, out_features, 2560).block_n == block_n
    # The 2560-row projections: 2 x 1024 strips where 4 x 512 would be chosen (ops.NARROW_STRIP); the
    # 1536-row one keeps 2 x 512, a short K keeps its power-of-two cap.
    assert choose_config(1, 2560, 4096) == GemvConfig(block_n=2, block_k=1024, num_warps=4)
    assert choose_config(1, 1536, 2560).block_k == 512
    assert choose_config(1, 2560, 300).block_k == 512
    assert choose_config(8, 4096, 2560) == GemvConfig(block_n=32, block_k=256, num_warps=8)
    assert choose_config(8, 512, 2560).block_n == 16


def test_gemv_rejects_bad_pdl_trigger():
    with pytest.raises(KernelInputError, match="pdl_trigger"):
        gemv(torch.randn(1, 32), torch.randn(8, 32), config=GemvConfig(block_n=8, block_k=32, pdl_trigger=3))


@pytest.mark.parametrize("l2_prefetch", [1, 2])
def test_gemv_l2_prefetch_matches_naive(device, l2_prefetch):
    """The strip's L2 prefetch before the wait (`GemvConfig.l2_prefetch`) leaves the product as it was:
    a partial last strip, a K that is not a multiple of the 64-element line, and a row stride wider
    than K. (On the CPU the prefetch is inline PTX and stays off, so this runs the launcher's plumbing;
    on a GPU it runs the prefetch itself.)"""
    x = torch.randn(1, 200, device=device).to(torch.bfloat16)
    weight = torch.randn(21, 260, device=device).to(torch.bfloat16)[:, :200]
    out = poison(torch.empty(1, 21, device=device))
    config = GemvConfig(block_n=4, block_k=64, l2_prefetch=l2_prefetch)
    gemv(x, weight, out_dtype=torch.float32, config=config, out=out)
    assert_close(f"gemv {config}", out, gemv_naive(x, weight, torch.float32), atol=1e-3, rtol=1e-3)


def test_gemv_prefetch_constants():
    """Two lines per thread a loop step; the interpreter never gets the inline PTX."""
    from bubblescope.kernels.gemv.ops import prefetch_constants

    assert prefetch_constants(GemvConfig(4, 512)) == {"PREFETCH": 0, "PREFETCH_LINES": 1}
    on = prefetch_constants(GemvConfig(4, 512, num_warps=8, l2_prefetch=2))
    if torch.cuda.is_available():
        assert on == {"PREFETCH": 2, "PREFETCH_LINES": 512}
    else:
        assert on == {"PREFETCH": 0, "PREFETCH_LINES": 1}


def test_gemv_rejects_bad_l2_prefetch():
    with pytest.raises(KernelInputError, match="l2_prefetch"):
        gemv(torch.randn(1, 32), torch.randn(8, 32), config=GemvConfig(block_n=8, block_k=32, l2_prefetch=3))
