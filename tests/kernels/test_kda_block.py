"""KDA block kernel (in_proj GEMV -> KDA decode -> o_proj GEMV) vs the composed PyTorch references.

On the CPU interpreter the kernel runs as three launches of the same code (PHASE 1, 2, 3: a grid
barrier would deadlock there); tests/kernels/test_kda_block_gpu.py checks the one-launch version.
"""

from __future__ import annotations

import copy

import pytest
import torch
from bubblescope.kernels.gemv import KernelInputError
from bubblescope.kernels.kda_block import KDABlockConfig, kda_block, kda_block_naive

from tests.kernels.helpers import assert_close, poison
from tests.kernels.test_kda_decode import make_layer


def make_block(heads, dim, hidden, out_features, device, dtype=torch.float32):
    """A KDA block: x `[1, D]`, in_proj `[5W + H, D]`, the layer's KDA weights and state, o_proj."""
    _, weights, state = make_layer(1, heads, dim, dim, device, act_dtype=dtype)
    width = heads * dim
    widths = (width,) * 5 + (heads,)
    x = torch.randn(1, hidden, device=device).to(dtype)
    in_proj = (torch.randn(sum(widths), hidden, device=device) / hidden**0.5).to(dtype)
    o_proj = (torch.randn(out_features, width, device=device) / width**0.5).to(dtype)
    return x, in_proj, widths, weights, state, o_proj


def check_block(block, atol, rtol, config):
    x, in_proj, widths, weights, state, o_proj = block
    want_state = copy.deepcopy(state)
    want = kda_block_naive(x, in_proj, widths, weights, want_state, o_proj)
    out = poison(torch.empty_like(want))
    kda_block(x, in_proj, widths, weights, state, o_proj, config=config, out=out)
    assert_close("kda_block out", out, want, atol, rtol)
    for name in ("q_conv", "k_conv", "v_conv", "recurrent"):
        assert_close(f"state.{name}", getattr(state, name), getattr(want_state, name), atol, rtol)


@pytest.mark.parametrize(
    ("heads", "dim", "hidden", "out_features", "v_splits", "programs"),
    [
        # 4 programs, one per KDA work item; strips of 8 and 4 rows: several strips per program.
        (2, 16, 24, 20, 2, None),
        # More programs than work items (the idle ones only take part); V split 3 ways (6 columns + rest).
        (2, 16, 40, 12, 3, 9),
    ],
)
def test_kda_block_three_launches_match_naive(device, heads, dim, hidden, out_features, v_splits, programs):
    torch.manual_seed(0)
    block = make_block(heads, dim, hidden, out_features, device)
    config = KDABlockConfig(
        persistent=False, v_splits=v_splits, programs=programs, in_tiles=(8, 16), out_tiles=(4, 16)
    )
    check_block(block, atol=2e-4, rtol=2e-4, config=config)


def test_kda_block_bf16_matches_naive(device):
    torch.manual_seed(1)
    block = make_block(2, 16, 32, 24, device, dtype=torch.bfloat16)
    check_block(block, atol=3e-2, rtol=3e-2, config=KDABlockConfig(persistent=False, v_splits=2))


def test_kda_block_rejects_bad_inputs(device):
    x, in_proj, widths, weights, state, o_proj = make_block(2, 16, 24, 20, device)
    with pytest.raises(KernelInputError, match="batch 1"):
        kda_block(x.expand(2, -1), in_proj, widths, weights, state, o_proj)
    with pytest.raises(KernelInputError, match="widths"):
        kda_block(x, in_proj, widths[:-1], weights, state, o_proj)
    with pytest.raises(KernelInputError, match=">= H \\* v_splits"):
        kda_block(
            x, in_proj, widths, weights, state, o_proj, config=KDABlockConfig(persistent=False, programs=2)
        )
    if device.type == "cpu":
        with pytest.raises(KernelInputError, match="needs a GPU"):
            kda_block(x, in_proj, widths, weights, state, o_proj, config=KDABlockConfig(persistent=True))
