"""Every kernel at real Ling-3.0-flash shapes on a GPU: eager, with PDL, and replayed from a CUDA graph.

Tolerances: outputs stored in bf16 are checked at atol = rtol = 2e-2 (a few bf16 ulps); fp32 outputs
computed from bf16 operands at 2e-3 (accumulation order only); token ids exactly.
Run: .venv/bin/python -m pytest tests/kernels/test_kernels_gpu.py -m gpu -q
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from bubblescope.kernels.gemv import gemv, gemv_naive
from bubblescope.kernels.kda_decode import KDALayerState, KDALayerWeights, kda_decode, kda_decode_naive
from bubblescope.kernels.lm_head import lm_head_greedy, lm_head_greedy_naive
from bubblescope.kernels.mla_decode import mla_decode, mla_decode_naive
from bubblescope.kernels.moe import MoEWeights, MoEWorkspace, RoutingRule, moe_fused, moe_naive, moe_unfused
from bubblescope.kernels.rmsnorm import add_rmsnorm, add_rmsnorm_naive

from tests.kernels.helpers import assert_close, poison

pytestmark = pytest.mark.gpu
MODES = ["eager", "pdl", "graph", "graph_pdl"]
BF16_TOL = 2e-2
FP32_TOL = 2e-3


def capture_graph(launch: Callable[[], object]) -> tuple[torch.cuda.CUDAGraph, object]:
    """Run launch() once on a side stream (compiles, and runs it), then capture it in a CUDA graph.

    Returns the graph (not yet replayed) and what the captured call returned.
    """
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        launch()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        result = launch()
    return graph, result


def run_mode(mode: str, launch: Callable[[bool], object], outputs: tuple[torch.Tensor, ...] = ()) -> object:
    """launch(use_pdl) once eagerly, or capture it in a CUDA graph (after a compiling warm-up) and replay.

    `outputs` are NaN-poisoned again after the warm-up, so only the replay can make them pass.
    """
    use_pdl = mode.endswith("pdl")
    if not mode.startswith("graph"):
        result = launch(use_pdl)
        torch.cuda.synchronize()
        return result
    graph, result = capture_graph(lambda: launch(use_pdl))
    for tensor in outputs:
        poison(tensor)
    graph.replay()
    torch.cuda.synchronize()
    return result


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rows", [1, 4, 16])
def test_gemv_q_proj_shape(mode, rows):
    x = torch.randn(rows, 2560, device="cuda", dtype=torch.bfloat16)
    weight = torch.randn(4096, 2560, device="cuda", dtype=torch.bfloat16) / 2560**0.5
    out = torch.full((rows, 4096), float("nan"), device="cuda")
    run_mode(mode, lambda pdl: gemv(x, weight, out_dtype=torch.float32, use_pdl=pdl, out=out), (out,))
    assert_close(f"gemv {mode}", out, gemv_naive(x, weight, torch.float32), FP32_TOL, FP32_TOL)


@pytest.mark.parametrize("mode", MODES)
def test_add_rmsnorm_hidden(mode):
    x = torch.randn(1, 2560, device="cuda", dtype=torch.bfloat16)
    residual = torch.randn(1, 2560, device="cuda", dtype=torch.bfloat16)
    weight = torch.rand(2560, device="cuda", dtype=torch.bfloat16)
    out = torch.full_like(x, float("nan"))
    res_out = torch.full_like(x, float("nan"))
    run_mode(
        mode,
        lambda pdl: add_rmsnorm(x, residual, weight, use_pdl=pdl, out=out, residual_out=res_out),
        (out, res_out),
    )
    want, want_res = add_rmsnorm_naive(x, residual, weight)
    assert_close(f"rmsnorm {mode}", out, want, BF16_TOL, BF16_TOL)
    assert_close(f"residual {mode}", res_out, want_res, BF16_TOL, BF16_TOL)


def flash_kda_layer():
    heads, dim, width = 32, 128, 4096
    acts = {
        name: torch.randn(1, width, device="cuda", dtype=torch.bfloat16)
        for name in ("q", "k", "v", "f", "gate")
    }
    acts["b"] = torch.randn(1, heads, device="cuda", dtype=torch.bfloat16)
    weights = KDALayerWeights(
        q_conv=torch.randn(width, 4, device="cuda", dtype=torch.bfloat16) * 0.5,
        k_conv=torch.randn(width, 4, device="cuda", dtype=torch.bfloat16) * 0.5,
        v_conv=torch.randn(width, 4, device="cuda", dtype=torch.bfloat16) * 0.5,
        a_log=torch.randn(heads, device="cuda") * 0.5,
        dt_bias=torch.randn(width, device="cuda"),
        o_norm=torch.rand(dim, device="cuda", dtype=torch.bfloat16) + 0.5,
    )
    state = KDALayerState(
        q_conv=torch.randn(1, width, 3, device="cuda", dtype=torch.bfloat16),
        k_conv=torch.randn(1, width, 3, device="cuda", dtype=torch.bfloat16),
        v_conv=torch.randn(1, width, 3, device="cuda", dtype=torch.bfloat16),
        recurrent=torch.randn(1, heads, dim, dim, device="cuda") * 0.1,
    )
    return acts, weights, state


@pytest.mark.parametrize("v_splits", [1, 4])
@pytest.mark.parametrize("mode", MODES)
def test_kda_decode_flash_layer(mode, v_splits):
    acts, weights, state = flash_kda_layer()
    initial = state.clone()
    want_state = state.clone()
    want = kda_decode_naive(**acts, weights=weights, state=want_state)
    out = torch.full_like(want, float("nan"))

    def launch(pdl: bool) -> None:
        # Restore the pre-step state first, so warm-up and every replay compute the same step.
        for name in ("q_conv", "k_conv", "v_conv", "recurrent"):
            getattr(state, name).copy_(getattr(initial, name))
        # The copies just wrote the state: no state read before gdc_wait (test_kda_decode_gpu.py
        # covers the prefetch after the in_proj GEMV, as the decoder runs it).
        kda_decode(
            **acts,
            weights=weights,
            state=state,
            use_pdl=pdl,
            out=out,
            v_splits=v_splits,
            prefetch_state=False,
        )

    run_mode(mode, launch, (out,))
    assert_close(f"kda {mode}", out, want, BF16_TOL, BF16_TOL)
    assert_close(f"kda state {mode}", state.recurrent, want_state.recurrent, FP32_TOL, FP32_TOL)
    assert torch.equal(state.q_conv, want_state.q_conv)
    assert torch.equal(state.k_conv, want_state.k_conv)
    assert torch.equal(state.v_conv, want_state.v_conv)


@pytest.mark.parametrize("v_splits", [2, 4, 8])
def test_kda_decode_split_graph_replays_chain_layers_and_steps(v_splits):
    """The fast path's use: several layers per step share one split workspace, captured with PDL in one
    graph and replayed step after step (the workspace must re-arm itself; states carry over)."""
    layers = [flash_kda_layer() for _ in range(3)]
    outs = [torch.full((1, 4096), float("nan"), device="cuda", dtype=torch.bfloat16) for _ in layers]
    naive_states = [state.clone() for _, _, state in layers]

    def launch(pdl: bool) -> None:
        for (acts, weights, state), out in zip(layers, outs, strict=True):
            kda_decode(**acts, weights=weights, state=state, use_pdl=pdl, out=out, v_splits=v_splits)

    graph, _ = capture_graph(lambda: launch(True))
    # Warm-up advanced the states once; capture ran nothing. Replay 4 more steps.
    steps = 1 + 4
    for _ in range(4):
        for out in outs:
            out.fill_(float("nan"))
        graph.replay()
    torch.cuda.synchronize()
    for index, ((acts, weights, state), out, want_state) in enumerate(
        zip(layers, outs, naive_states, strict=True)
    ):
        for _ in range(steps):
            want = kda_decode_naive(**acts, weights=weights, state=want_state)
        assert_close(f"kda split {v_splits} layer {index} out", out, want, BF16_TOL, BF16_TOL)
        assert_close(
            f"kda split {v_splits} layer {index} state",
            state.recurrent,
            want_state.recurrent,
            FP32_TOL,
            FP32_TOL,
        )


@pytest.mark.parametrize("v_splits", [2, 4])
def test_kda_decode_split_is_bit_deterministic(v_splits):
    """Same inputs, same bits: the fast path's exact switch checks (1e-5 on logits through 24 layers)
    need it, so the head's RMSNorm may not sum slices in arrival order."""
    acts, weights, state = flash_kda_layer()
    initial = [t.clone() for t in (state.q_conv, state.k_conv, state.v_conv, state.recurrent)]
    results = []
    for _ in range(8):
        for name, tensor in zip(("q_conv", "k_conv", "v_conv", "recurrent"), initial, strict=True):
            getattr(state, name).copy_(tensor)
        out = kda_decode(
            **acts, weights=weights, state=state, use_pdl=True, v_splits=v_splits, prefetch_state=False
        )
        results.append((out.clone(), state.recurrent.clone()))
    torch.cuda.synchronize()
    for index, (out, recurrent) in enumerate(results[1:], start=1):
        assert torch.equal(out, results[0][0]), f"run {index}: output bits differ"
        assert torch.equal(recurrent, results[0][1]), f"run {index}: state bits differ"


@pytest.mark.parametrize("mode", MODES)
def test_mla_decode_8k_context(mode):
    q_latent = torch.randn(1, 32, 512, device="cuda", dtype=torch.bfloat16)
    q_pe = torch.randn(1, 32, 64, device="cuda", dtype=torch.bfloat16)
    cache = torch.randn(1, 8192, 576, device="cuda", dtype=torch.bfloat16)
    seq_lens = torch.tensor([5001], device="cuda", dtype=torch.int32)
    out = torch.full((1, 32, 512), float("nan"), device="cuda")
    run_mode(
        mode, lambda pdl: mla_decode(q_latent, q_pe, cache, seq_lens, 192**-0.5, use_pdl=pdl, out=out), (out,)
    )
    want = mla_decode_naive(q_latent, q_pe, cache, seq_lens, 192**-0.5)
    assert_close(f"mla {mode}", out, want, BF16_TOL, BF16_TOL)


def flash_moe_weights(router_dtype: torch.dtype) -> MoEWeights:
    experts, hidden, inter = 256, 2560, 768
    return MoEWeights(
        router=(torch.randn(experts, hidden, device="cuda") / hidden**0.5).to(router_dtype),
        expert_bias=torch.randn(experts, device="cuda") * 0.1,
        w13=torch.randn(experts + 1, 2 * inter, hidden, device="cuda", dtype=torch.bfloat16) / hidden**0.5,
        w2=torch.randn(experts + 1, hidden, inter, device="cuda", dtype=torch.bfloat16) / inter**0.5,
        shared_slot=experts,
        swiglu_limit=4.0,
        shared_swiglu_limit=5.0,
    )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("router_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [1, 10])  # 10: a verify window, routed by the parallel launch
def test_moe_layer_flash_e256(mode, router_dtype, rows):
    weights = flash_moe_weights(router_dtype)
    rule = RoutingRule(top_k=8, n_group=8, topk_group=4, scale=2.5)
    x = torch.randn(rows, 2560, device="cuda", dtype=torch.bfloat16)
    want = moe_naive(x, weights, rule)
    workspace = MoEWorkspace.allocate(rows, weights, rule)
    fused_out = torch.full((rows, 2560), float("nan"), device="cuda")
    run_mode(
        mode,
        lambda pdl: moe_fused(x, weights, rule, use_pdl=pdl, workspace=workspace, out=fused_out),
        (fused_out,),
    )
    assert_close(f"moe fused {mode}", fused_out, want, FP32_TOL, FP32_TOL)
    unfused = run_mode(mode, lambda pdl: moe_unfused(x, weights, rule, use_pdl=pdl, workspace=workspace))
    assert_close(f"moe unfused {mode}", unfused, want, FP32_TOL, FP32_TOL)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("w_dtype", [torch.bfloat16, torch.float32])
def test_lm_head_greedy_vocab(mode, w_dtype):
    x = torch.randn(1, 2560, device="cuda", dtype=torch.bfloat16)
    weight = (torch.randn(157184, 2560, device="cuda") / 2560**0.5).to(w_dtype)
    tokens = torch.full((1,), -1, device="cuda", dtype=torch.int64)
    logits = torch.full((1, 157184), float("nan"), device="cuda")
    run_mode(
        mode,
        lambda pdl: lm_head_greedy(x, weight, use_pdl=pdl, logits=logits, tokens=tokens),
        (logits, tokens),
    )
    want_tokens, want_logits = lm_head_greedy_naive(x, weight)
    assert_close(f"lm_head logits {mode}", logits, want_logits, FP32_TOL, FP32_TOL)
    assert tokens.tolist() == want_tokens.tolist(), (
        f"{mode}: token {tokens.tolist()} != {want_tokens.tolist()}"
    )
