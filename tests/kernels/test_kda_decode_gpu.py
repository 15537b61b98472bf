"""KDA decode on the GPU as the decoder runs it: after its in_proj GEMV, under PDL, in a replayed graph.

The state is read before `gdc_wait` there (prefetch_state), which is only correct because the kernel
just before it (the GEMV) does not write the state and itself waits for everything earlier. These
tests check exactly that setting step after step, the contract's other side (prefetch_state=False
for two steps of one layer back to back), and that the splits the decoder may pick stay bit-stable.
Run: .venv/bin/python -m pytest tests/kernels/test_kda_decode_gpu.py -m gpu -q
"""

from __future__ import annotations

import pytest
import torch
from bubblescope.kernels.gemv import gemv
from bubblescope.kernels.kda_decode import KDALayerState, KDALayerWeights, kda_decode, kda_decode_naive

from tests.kernels.helpers import assert_close

pytestmark = pytest.mark.gpu
BF16_TOL = 2e-2
FP32_TOL = 2e-3
HIDDEN, HEADS, DIM = 2560, 32, 128
WIDTHS = (HEADS * DIM,) * 5 + (HEADS,)


def flash_layer() -> tuple[torch.Tensor, KDALayerWeights, KDALayerState]:
    """A Flash-shaped KDA layer: in_proj weight `[5W + H, D]`, decode weights and a non-zero state."""
    width = HEADS * DIM
    in_proj = torch.randn(sum(WIDTHS), HIDDEN, device="cuda", dtype=torch.bfloat16) / HIDDEN**0.5
    weights = KDALayerWeights(
        *(torch.randn(width, 4, device="cuda", dtype=torch.bfloat16) * 0.5 for _ in range(3)),
        a_log=torch.randn(HEADS, device="cuda") * 0.5,
        dt_bias=torch.randn(width, device="cuda"),
        o_norm=torch.rand(DIM, device="cuda", dtype=torch.bfloat16) + 0.5,
    )
    state = KDALayerState(
        *(torch.randn(1, width, 3, device="cuda", dtype=torch.bfloat16) for _ in range(3)),
        recurrent=torch.randn(1, HEADS, DIM, DIM, device="cuda") * 0.1,
    )
    return in_proj, weights, state


def capture(launch) -> torch.cuda.CUDAGraph:
    """Run launch() once on a side stream (compiles; advances the states once), then capture it."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        launch()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        launch()
    return graph


@pytest.mark.parametrize("v_splits", [1, 4, 8, 16])
def test_kda_after_in_proj_gemv_pdl_graph_steps(v_splits):
    """Three layers of [in_proj GEMV -> KDA decode], PDL, one graph replayed for 4 more steps: outputs
    and states match the reference run on the same projections for every step."""
    x = torch.randn(1, HIDDEN, device="cuda", dtype=torch.bfloat16)
    layers = [flash_layer() for _ in range(3)]
    projs = [torch.empty(1, sum(WIDTHS), device="cuda", dtype=torch.bfloat16) for _ in layers]
    outs = [torch.empty(1, HEADS * DIM, device="cuda", dtype=torch.bfloat16) for _ in layers]
    want_states = [state.clone() for _, _, state in layers]

    def launch() -> None:
        for (in_proj, weights, state), proj, out in zip(layers, projs, outs, strict=True):
            gemv(x, in_proj, use_pdl=True, out=proj)
            q, k, v, f, g, b = proj.split(WIDTHS, dim=1)
            kda_decode(q, k, v, f, b, g, weights, state, use_pdl=True, out=out, v_splits=v_splits)

    graph = capture(launch)
    for step in range(1, 6):
        if step > 1:
            for out in outs:
                out.fill_(float("nan"))
            graph.replay()
        torch.cuda.synchronize()
        for index, ((_, weights, state), proj, out, want_state) in enumerate(
            zip(layers, projs, outs, want_states, strict=True)
        ):
            q, k, v, f, g, b = proj.split(WIDTHS, dim=1)
            want = kda_decode_naive(q, k, v, f, b, g, weights, want_state)
            name = f"split {v_splits} step {step} layer {index}"
            assert_close(f"{name} out", out, want, BF16_TOL, BF16_TOL)
            assert_close(f"{name} state", state.recurrent, want_state.recurrent, FP32_TOL, FP32_TOL)
            for conv in ("q_conv", "k_conv", "v_conv"):
                assert torch.equal(getattr(state, conv), getattr(want_state, conv)), f"{name} {conv}"


@pytest.mark.parametrize("v_splits", [1, 8])
def test_kda_same_layer_back_to_back_pdl_without_prefetch(v_splits):
    """Two tokens of ONE layer as consecutive PDL launches (each reads what the other just wrote):
    correct with prefetch_state=False, the documented way to chain a layer on itself."""
    in_proj, weights, state = flash_layer()
    tokens = [torch.randn(1, sum(WIDTHS), device="cuda", dtype=torch.bfloat16) for _ in range(2)]
    outs = [torch.empty(1, HEADS * DIM, device="cuda", dtype=torch.bfloat16) for _ in tokens]
    initial = state.clone()

    def launch() -> None:
        for proj, out in zip(tokens, outs, strict=True):
            q, k, v, f, g, b = proj.split(WIDTHS, dim=1)
            kda_decode(
                q,
                k,
                v,
                f,
                b,
                g,
                weights,
                state,
                use_pdl=True,
                out=out,
                v_splits=v_splits,
                prefetch_state=False,
            )

    graph = capture(launch)
    for name in ("q_conv", "k_conv", "v_conv", "recurrent"):
        getattr(state, name).copy_(getattr(initial, name))
    graph.replay()
    torch.cuda.synchronize()
    want_state = initial.clone()
    for index, (proj, out) in enumerate(zip(tokens, outs, strict=True)):
        q, k, v, f, g, b = proj.split(WIDTHS, dim=1)
        want = kda_decode_naive(q, k, v, f, b, g, weights, want_state)
        assert_close(f"token {index} out", out, want, BF16_TOL, BF16_TOL)
    assert_close("state", state.recurrent, want_state.recurrent, FP32_TOL, FP32_TOL)


@pytest.mark.parametrize("v_splits", [8, 16])
def test_kda_split_is_bit_deterministic(v_splits):
    """Same inputs, same bits at the larger splits too (the head's norm sums slices in a fixed order)."""
    in_proj, weights, state = flash_layer()
    proj = torch.randn(1, sum(WIDTHS), device="cuda", dtype=torch.bfloat16)
    q, k, v, f, g, b = proj.split(WIDTHS, dim=1)
    initial = state.clone()
    results = []
    for _ in range(6):
        for name in ("q_conv", "k_conv", "v_conv", "recurrent"):
            getattr(state, name).copy_(getattr(initial, name))
        out = kda_decode(q, k, v, f, b, g, weights, state, v_splits=v_splits)
        results.append((out.clone(), state.recurrent.clone()))
    torch.cuda.synchronize()
    for index, (out, recurrent) in enumerate(results[1:], start=1):
        assert torch.equal(out, results[0][0]), f"run {index}: output bits differ"
        assert torch.equal(recurrent, results[0][1]), f"run {index}: state bits differ"
