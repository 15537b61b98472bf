"""The decode GEMV with its strip prefetched into L2 before `gdc_wait` (`GemvConfig.l2_prefetch`, a
benchmark arm), alone and with two tiles in flight per program (`GemvConfig.pairs`), at the decode
step's 2560-row shapes on a GPU: eager, PDL, CUDA graph and graph + PDL, against kernels/gemv/naive.py.

The prefetch is inline PTX that changes when bytes arrive, never what is computed, so the products must
equal the plain launch's within fp32 accumulation order (2e-3, the other GEMV GPU tests' tolerance).
Odd shapes check the prefetch's address arithmetic cannot break the launch: a partial last strip, K not
a multiple of the 128-byte line, a row stride wider than K.
Run: .venv/bin/python -m pytest tests/kernels/test_gemv_prefetch_gpu.py -m gpu -q
"""

from __future__ import annotations

import pytest
import torch
from bubblescope.kernels.gemv import GemvConfig, gemv, gemv_naive
from bubblescope.kernels.gemv.ops import choose_config

from tests.kernels.helpers import assert_close
from tests.kernels.test_kernels_gpu import FP32_TOL, MODES, run_mode

pytestmark = pytest.mark.gpu

# (N, K, row stride): KDA o_proj / MLA dense, dense FFN down, and an odd one.
SHAPES = [(2560, 4096, 4096), (2560, 6144, 6144), (2555, 4100, 4160)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("out_features", "in_features", "stride"), SHAPES)
@pytest.mark.parametrize(("l2_prefetch", "pairs"), [(1, False), (2, False), (1, True)])
def test_gemv_l2_prefetch_real_shapes(mode, out_features, in_features, stride, l2_prefetch, pairs):
    x = torch.randn(1, in_features, device="cuda", dtype=torch.bfloat16)
    storage = torch.randn(out_features, stride, device="cuda", dtype=torch.bfloat16) / in_features**0.5
    weight = storage[:, :in_features]
    config = GemvConfig(
        **{**choose_config(1, out_features, in_features).__dict__, "l2_prefetch": l2_prefetch, "pairs": pairs}
    )
    out = torch.full((1, out_features), float("nan"), device="cuda")
    run_mode(
        mode,
        lambda pdl: gemv(x, weight, out_dtype=torch.float32, use_pdl=pdl, config=config, out=out),
        (out,),
    )
    assert_close(
        f"gemv prefetch {l2_prefetch} pairs {pairs} {mode}",
        out,
        gemv_naive(x, weight, torch.float32),
        FP32_TOL,
        FP32_TOL,
    )
