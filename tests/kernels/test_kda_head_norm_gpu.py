"""`kda_norm_in_oproj` on the GPU at Flash (e256) shapes, as the decoder runs it: in_proj GEMV ->
kda_decode_heads -> gemv_head_norm (o_proj 2560 x 4096), PDL, one CUDA graph replayed step after step.

Reference each step: kda_decode_naive (the gated norm included) then gemv_naive on the same projections,
from a state stepped beside the graph's. Stated tolerances: o_proj's output within the bf16 kernels'
2e-2 (the normed row is rounded to bf16 in both), the fp32 state within 2e-3, the conv states exact.
A missed norm, a wrong head's sum or a stale x read under PDL moves the output by O(1).
Run: .venv/bin/python -m pytest tests/kernels/test_kda_head_norm_gpu.py -m gpu -q
"""

from __future__ import annotations

import pytest
import torch
from bubblescope.kernels.gemv import gemv, gemv_naive
from bubblescope.kernels.gemv.head_norm_prologue import gemv_head_norm
from bubblescope.kernels.gemv.norm_epilogue import gemv_add_rmsnorm
from bubblescope.kernels.kda_decode import kda_decode_naive
from bubblescope.kernels.kda_decode.heads import KDAHeads, kda_decode_heads
from bubblescope.kernels.rmsnorm import NormEpilogue

from tests.kernels.helpers import assert_close
from tests.kernels.test_kda_decode_gpu import (
    BF16_TOL,
    DIM,
    FP32_TOL,
    HEADS,
    HIDDEN,
    WIDTHS,
    capture,
    flash_layer,
)

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize(("v_splits", "early_ticket"), [(1, True), (4, True), (8, True), (4, False)])
def test_kda_block_with_norm_in_oproj_pdl_graph_steps(v_splits, early_ticket):
    """Three layers of [in_proj -> KDA heads -> o_proj with the head norm], PDL, one graph, 5 steps."""
    x = torch.randn(1, HIDDEN, device="cuda", dtype=torch.bfloat16)
    layers = [flash_layer() for _ in range(3)]
    o_projs = [torch.randn(HIDDEN, HEADS * DIM, device="cuda", dtype=torch.bfloat16) / 64 for _ in layers]
    projs = [torch.empty(1, sum(WIDTHS), device="cuda", dtype=torch.bfloat16) for _ in layers]
    heads = [KDAHeads.allocate(1, HEADS, DIM, v_splits, torch.device("cuda")) for _ in layers]
    outs = [torch.empty(1, HIDDEN, device="cuda", dtype=torch.bfloat16) for _ in layers]
    want_states = [state.clone() for _, _, state in layers]

    def launch() -> None:
        for (in_proj, weights, state), o_proj, proj, head, out in zip(
            layers, o_projs, projs, heads, outs, strict=True
        ):
            gemv(x, in_proj, use_pdl=True, out=proj)
            q, k, v, f, g, b = proj.split(WIDTHS, dim=1)
            kda_decode_heads(
                q,
                k,
                v,
                f,
                b,
                g,
                weights,
                state,
                use_pdl=True,
                heads=head,
                v_splits=v_splits,
                early_ticket=early_ticket,
            )
            gemv_head_norm(head.out, head.sumsq, o_proj, use_pdl=True, out=out)

    graph = capture(launch)
    for step in range(1, 6):
        if step > 1:
            for out in outs:
                out.fill_(float("nan"))
            graph.replay()
        torch.cuda.synchronize()
        for index, ((_, weights, state), o_proj, proj, out, want_state) in enumerate(
            zip(layers, o_projs, projs, outs, want_states, strict=True)
        ):
            q, k, v, f, g, b = proj.split(WIDTHS, dim=1)
            attn = kda_decode_naive(q, k, v, f, b, g, weights, want_state)
            want = gemv_naive(attn, o_proj)
            name = f"split {v_splits} early ticket {early_ticket} step {step} layer {index}"
            assert_close(f"{name} o_proj", out, want, BF16_TOL, BF16_TOL)
            assert_close(f"{name} state", state.recurrent, want_state.recurrent, FP32_TOL, FP32_TOL)
            for conv in ("q_conv", "k_conv", "v_conv"):
                assert torch.equal(getattr(state, conv), getattr(want_state, conv)), f"{name} {conv}"


def test_gemv_head_norm_with_norm_epilogue_under_pdl():
    """Both switches: the prologue's o_proj plus the next add + RMSNorm in one launch, replayed twice
    (the re-armed counter): y against the launch without the epilogue, the norm against gemv_add_rmsnorm's."""
    torch.manual_seed(0)
    width = HEADS * DIM
    x = torch.randn(1, width, device="cuda")
    sumsq = (x.view(1, HEADS, 4, DIM // 4) ** 2).sum(-1)
    o_proj = torch.randn(HIDDEN, width, device="cuda", dtype=torch.bfloat16) / 64
    norm_weight = torch.rand(HIDDEN, device="cuda", dtype=torch.bfloat16) + 0.5
    residual0 = torch.randn(1, HIDDEN, device="cuda", dtype=torch.bfloat16)
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    residual, normed = residual0.clone(), torch.empty_like(residual0)
    epilogue = NormEpilogue(residual, norm_weight, normed, counter, 1e-6)
    y = torch.empty(1, HIDDEN, device="cuda", dtype=torch.bfloat16)

    def launch() -> None:
        residual.copy_(residual0)
        gemv_head_norm(x, sumsq, o_proj, use_pdl=True, out=y, epilogue=epilogue)

    graph = capture(launch)
    for _ in range(2):
        normed.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        attn = gemv_head_norm(x, sumsq, o_proj)
        assert_close("y with vs without the epilogue", y, attn, BF16_TOL, BF16_TOL)
        # Reference norm: gemv_add_rmsnorm's epilogue over an identity product of the launch's own y
        # (exact: one non-zero term per output), so the residual must agree bit for bit.
        want_residual = residual0.clone()
        identity = torch.eye(HIDDEN, device="cuda", dtype=torch.bfloat16)
        want_epilogue = NormEpilogue(
            want_residual, norm_weight, torch.empty_like(normed), counter.clone(), 1e-6
        )
        want = gemv_add_rmsnorm(y.clone(), identity, want_epilogue)
        assert_close("normed", normed, want, BF16_TOL, BF16_TOL)
        assert torch.equal(residual, want_residual), "residual differs"
