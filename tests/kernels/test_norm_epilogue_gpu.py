"""`norm_epilogue` launches at real ling3-flash-e256 shapes on a GPU: eager, PDL, CUDA-graph replays; the
output GEMVs (KDA o_proj, dense FFN down) and the MoE layer's output launches (fused, deep + early
shared, unfused down).

Stated tolerance against the separate launches the switch replaces (gemv, then add_rmsnorm): the
projection and the new residual bit for bit (same strips, same fp32 sums, same roundings; for the MoE
the residual is compared with add_rmsnorm on the same y, since the atomics' order varies); the normed
row within one bf16 ulp on at most 1 % of its elements (only the order in which sum(r^2) is reduced
differs, the epilogue's 512-element chunks and warps against add_rmsnorm's: rstd moves by an fp32
rounding). Against the plain PyTorch reference: 2e-2 (a few bf16 ulps).
Run: .venv/bin/python -m pytest -q -m gpu tests/kernels/test_norm_epilogue_gpu.py
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from bubblescope.kernels.gemv import gemv
from bubblescope.kernels.gemv.norm_epilogue import gemv_add_rmsnorm
from bubblescope.kernels.moe import (
    FusedMoEConfig,
    MoEWorkspace,
    RoutingRule,
    moe_fused,
    moe_naive,
    moe_unfused,
)
from bubblescope.kernels.rmsnorm import NormEpilogue, add_rmsnorm, epilogue_add_rmsnorm_naive

from tests.kernels.helpers import assert_close

pytestmark = pytest.mark.gpu
MODES = ["eager", "pdl", "graph", "graph_pdl"]
HIDDEN = 2560
EPS = 1e-6
BF16_TOL = 2e-2
# Normed elements allowed one bf16 ulp away from add_rmsnorm's (rstd's last fp32 bit, see docstring).
ULP_SHARE = 0.01


def one_ulp_off_share(got: torch.Tensor, want: torch.Tensor) -> float:
    """Share of elements that differ; asserts none differs by more than one bf16 ulp."""
    diff = (got.float() - want.float()).abs()
    ulp = torch.finfo(torch.bfloat16).eps * want.float().abs().clamp_min(torch.finfo(torch.bfloat16).tiny)
    assert (diff <= ulp * 1.01).all(), f"max diff {diff.max().item():.3e} exceeds one bf16 ulp"
    return float((diff > 0).float().mean())


def replayed(
    mode: str, launch: Callable[[bool], object], residual: torch.Tensor, start: torch.Tensor
) -> None:
    """launch(use_pdl) eagerly, or captured in a CUDA graph and replayed TWICE from the same residual (the
    second replay needs the counter re-armed by the first); the residual is reset before each run."""
    use_pdl = mode.endswith("pdl")
    residual.copy_(start)
    if mode.startswith("graph"):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            launch(use_pdl)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            launch(use_pdl)
        for _ in range(2):
            residual.copy_(start)
            graph.replay()
    else:
        launch(use_pdl)
    torch.cuda.synchronize()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("in_features", [4096, 6144], ids=["o_proj", "dense_down"])
def test_gemv_norm_epilogue_e256(mode: str, in_features: int) -> None:
    torch.manual_seed(0)
    x = torch.randn(1, in_features, device="cuda", dtype=torch.bfloat16)
    weight = torch.randn(HIDDEN, in_features, device="cuda", dtype=torch.bfloat16) / in_features**0.5
    start = torch.randn(1, HIDDEN, device="cuda", dtype=torch.bfloat16)
    norm_weight = torch.rand(HIDDEN, device="cuda", dtype=torch.bfloat16) + 0.5
    residual = start.clone()
    y = torch.full((1, HIDDEN), float("nan"), device="cuda", dtype=torch.bfloat16)
    epilogue = NormEpilogue(
        residual=residual,
        weight=norm_weight,
        out=torch.full((1, HIDDEN), float("nan"), device="cuda", dtype=torch.bfloat16),
        counter=torch.zeros(1, dtype=torch.int32, device="cuda"),
        eps=EPS,
    )
    replayed(mode, lambda pdl: gemv_add_rmsnorm(x, weight, epilogue, use_pdl=pdl, y=y), residual, start)
    assert int(epilogue.counter.item()) == 0, "the last program must re-arm the counter"
    # The separate launches the switch replaces.
    want_y = gemv(x, weight)
    separate_res = start.clone()
    separate, _ = add_rmsnorm(want_y, separate_res, norm_weight, EPS, residual_out=separate_res)
    torch.cuda.synchronize()
    assert torch.equal(y, want_y), "the projection must be the plain GEMV's, bit for bit"
    assert torch.equal(residual, separate_res), "the residual must be add_rmsnorm's, bit for bit"
    share = one_ulp_off_share(epilogue.out, separate)
    assert share <= ULP_SHARE, f"{share:.2%} of the normed row one ulp off add_rmsnorm's"
    want, want_res = epilogue_add_rmsnorm_naive(want_y, start, norm_weight, EPS, torch.bfloat16)
    assert_close(f"normed {mode}", epilogue.out, want, BF16_TOL, BF16_TOL)
    print(f"{mode} K={in_features}: {share:.3%} of the normed row one bf16 ulp off add_rmsnorm's")


@pytest.fixture(scope="module")
def e256_layer():
    """(weights, rule, x, moe_naive's y) of one ling3-flash-e256 MoE layer, one row."""
    from tests.kernels.test_kernels_gpu import flash_moe_weights

    torch.manual_seed(1)
    weights = flash_moe_weights(torch.bfloat16)
    rule = RoutingRule(top_k=8, n_group=8, topk_group=4, scale=2.5)
    x = torch.randn(1, HIDDEN, device="cuda", dtype=torch.bfloat16)
    return weights, rule, x, moe_naive(x, weights, rule)


# The step's fused configurations (blocks.moe_block: round-2 all on is deep_experts + early_shared +
# fast_topk) and the unfused down launch.
MOE_CONFIGS = {
    "fused": FusedMoEConfig(),
    "deep_early_shared": FusedMoEConfig(fast_topk=True, early_shared=True, deep_experts=True),
    "unfused": None,
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(MOE_CONFIGS))
def test_moe_norm_epilogue_e256(e256_layer, mode: str, name: str) -> None:
    weights, rule, x, want_y = e256_layer
    config = MOE_CONFIGS[name]
    start = torch.randn(1, HIDDEN, device="cuda", dtype=torch.bfloat16)
    residual = start.clone()
    epilogue = NormEpilogue(
        residual=residual,
        weight=torch.rand(HIDDEN, device="cuda", dtype=torch.bfloat16) + 0.5,
        out=torch.full((1, HIDDEN), float("nan"), device="cuda", dtype=torch.bfloat16),
        counter=torch.zeros(1, dtype=torch.int32, device="cuda"),
        eps=EPS,
    )
    workspace = MoEWorkspace.allocate(1, weights, rule)
    y = torch.full((1, HIDDEN), float("nan"), device="cuda")

    def launch(pdl: bool) -> None:
        if config is None:
            y.copy_(moe_unfused(x, weights, rule, use_pdl=pdl, workspace=workspace, epilogue=epilogue))
        else:
            moe_fused(
                x, weights, rule, use_pdl=pdl, workspace=workspace, config=config, out=y, epilogue=epilogue
            )

    replayed(mode, launch, residual, start)
    assert int(epilogue.counter.item()) == 0, "the last program must re-arm the counter"
    assert_close(f"moe {name} {mode}", y, want_y, 2e-3, 2e-3)
    separate_res = start.clone()
    separate, _ = add_rmsnorm(
        y, separate_res, epilogue.weight, EPS, out=torch.empty_like(start), residual_out=separate_res
    )
    torch.cuda.synchronize()
    assert torch.equal(residual, separate_res), (
        "the residual must be add_rmsnorm's on the same y, bit for bit"
    )
    share = one_ulp_off_share(epilogue.out, separate)
    assert share <= ULP_SHARE, f"{share:.2%} of the normed row one ulp off add_rmsnorm's"
    print(f"moe {name} {mode}: {share:.3%} of the normed row one bf16 ulp off add_rmsnorm's")
