"""The one-launch KDA block (grid barriers) on the GPU against today's three launches, at e256 shapes.

Three layers, each `in_proj GEMV -> kda_decode (4 V splits) -> o_proj GEMV` as the decoder runs them,
and the same three layers (cloned states) through `kda_block`, each path captured in one CUDA graph
under PDL and replayed for three steps: every replay re-arms the grid barrier and the head tickets.
With the decoder's GEMV tiles the two paths do the same arithmetic in the same order: bit-identical;
other strip tiles change the in_proj / o_proj summation order: within bf16 rounding.
Run: .venv/bin/python -m pytest tests/kernels/test_kda_block_gpu.py -m gpu -q -s
"""

from __future__ import annotations

import pytest
import torch
from bubblescope.kernels.gemv import KernelInputError, gemv
from bubblescope.kernels.kda_block import KDABlockConfig, kda_block, kda_block_naive
from bubblescope.kernels.kda_block.ops import LAST_LAUNCH
from bubblescope.kernels.kda_decode import kda_decode

from tests.kernels.helpers import assert_close
from tests.kernels.test_kda_decode_gpu import DIM, HEADS, HIDDEN, WIDTHS, capture, flash_layer

pytestmark = pytest.mark.gpu
BF16_TOL = 2e-2
FP32_TOL = 2e-3
# (label, config, bit-identical to the three launches expected)
CONFIGS = [
    ("gemv tiles, L2 prefetch", KDABlockConfig(), True),
    ("gemv tiles, no prefetch", KDABlockConfig(l2_prefetch=False), True),
    ("gemv tiles, maxnreg 128", KDABlockConfig(max_registers=128), True),
    ("16x512 / 2x512 strips", KDABlockConfig(in_tiles=(16, 512), out_tiles=(2, 512)), False),
]


def three_launches(x, in_proj, weights, state, o_proj, proj, attn, out) -> None:
    """Today's block: the decoder's kda_block in reference_model/fast/blocks.py, PDL on."""
    gemv(x, in_proj, use_pdl=True, out=proj)
    q, k, v, f, g, b = proj.split(WIDTHS, dim=1)
    kda_decode(q, k, v, f, b, g, weights, state, use_pdl=True, out=attn, v_splits=4)
    gemv(attn, o_proj, use_pdl=True, out=out)


def max_diff(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.double() - want.double()).abs().max())


@pytest.mark.parametrize(("label", "config", "identical"), CONFIGS, ids=[c[0] for c in CONFIGS])
def test_one_launch_matches_three_launches_in_pdl_graph(label, config, identical):
    torch.manual_seed(0)
    x = torch.randn(1, HIDDEN, device="cuda", dtype=torch.bfloat16)
    layers = []
    for _ in range(3):
        in_proj, weights, state = flash_layer()
        o_proj = torch.randn(HIDDEN, HEADS * DIM, device="cuda", dtype=torch.bfloat16) / (HEADS * DIM) ** 0.5
        layers.append((in_proj, weights, state, state.clone(), o_proj))
    outs_old = [torch.empty(1, HIDDEN, device="cuda", dtype=torch.bfloat16) for _ in layers]
    outs_new = [torch.empty(1, HIDDEN, device="cuda", dtype=torch.bfloat16) for _ in layers]
    proj = torch.empty(1, sum(WIDTHS), device="cuda", dtype=torch.bfloat16)
    attn = torch.empty(1, HEADS * DIM, device="cuda", dtype=torch.bfloat16)

    def old() -> None:
        for (in_proj, weights, state, _, o_proj), out in zip(layers, outs_old, strict=True):
            three_launches(x, in_proj, weights, state, o_proj, proj, attn, out)

    def new() -> None:
        for (in_proj, weights, _, state, o_proj), out in zip(layers, outs_new, strict=True):
            kda_block(x, in_proj, WIDTHS, weights, state, o_proj, use_pdl=True, config=config, out=out)

    # Capturing runs each path once (step 1); each replay is one more step.
    graphs = (capture(old), capture(new))
    for step in range(1, 5):
        if step > 1:
            for out in outs_new:
                out.fill_(float("nan"))
            for graph in graphs:
                graph.replay()
        torch.cuda.synchronize()
        for index, ((_, _, state_old, state_new, _), out_old, out_new) in enumerate(
            zip(layers, outs_old, outs_new, strict=True)
        ):
            name = f"{label}: step {step} layer {index}"
            print(
                f"{name}: out max diff {max_diff(out_new, out_old):.3e}, state max diff "
                f"{max_diff(state_new.recurrent, state_old.recurrent):.3e} ({LAST_LAUNCH.programs} programs, "
                f"{LAST_LAUNCH.facts})"
            )
            if identical:
                assert torch.equal(out_new, out_old), f"{name}: output bits differ"
                assert torch.equal(state_new.recurrent, state_old.recurrent), f"{name}: state bits differ"
            else:
                assert_close(f"{name} out", out_new, out_old, BF16_TOL, BF16_TOL)
                assert_close(f"{name} state", state_new.recurrent, state_old.recurrent, FP32_TOL, FP32_TOL)
            for conv in ("q_conv", "k_conv", "v_conv"):
                assert torch.equal(getattr(state_new, conv), getattr(state_old, conv)), f"{name} {conv}"


def test_one_launch_eager_matches_naive():
    """Without PDL or a graph, against the composed PyTorch references."""
    torch.manual_seed(1)
    in_proj, weights, state = flash_layer()
    o_proj = torch.randn(HIDDEN, HEADS * DIM, device="cuda", dtype=torch.bfloat16) / (HEADS * DIM) ** 0.5
    x = torch.randn(1, HIDDEN, device="cuda", dtype=torch.bfloat16)
    want_state = state.clone()
    want = kda_block_naive(x, in_proj, WIDTHS, weights, want_state, o_proj)
    got = kda_block(x, in_proj, WIDTHS, weights, state, o_proj)
    assert_close("out", got, want, BF16_TOL, BF16_TOL)
    assert_close("state", state.recurrent, want_state.recurrent, FP32_TOL, FP32_TOL)


def test_one_launch_refuses_a_grid_the_gpu_cannot_hold():
    in_proj, weights, state = flash_layer()
    o_proj = torch.randn(HIDDEN, HEADS * DIM, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(1, HIDDEN, device="cuda", dtype=torch.bfloat16)
    kda_block(x, in_proj, WIDTHS, weights, state, o_proj)
    too_many = KDABlockConfig(programs=LAST_LAUNCH.programs + 1)
    with pytest.raises(KernelInputError, match="holds only"):
        kda_block(x, in_proj, WIDTHS, weights, state, o_proj, config=too_many)
