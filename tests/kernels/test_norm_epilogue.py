"""The add + RMSNorm in a producer's epilogue (`norm_epilogue`) vs the plain references and vs the
separate add_rmsnorm launch it replaces (CPU interpreter here; real shapes in test_norm_epilogue_gpu.py)."""

from __future__ import annotations

import pytest
import torch
from bubblescope.kernels.gemv import GemvConfig, KernelInputError, gemv, gemv_naive
from bubblescope.kernels.gemv.norm_epilogue import gemv_add_rmsnorm
from bubblescope.kernels.moe import FusedMoEConfig, RoutingRule, moe_fused, moe_naive, moe_unfused
from bubblescope.kernels.rmsnorm import NormEpilogue, add_rmsnorm, epilogue_add_rmsnorm_naive

from tests.kernels.helpers import assert_close, poison
from tests.kernels.test_moe import make_weights

EPS = 1e-6


def epilogue_for(residual: torch.Tensor, width: int, dtype: torch.dtype, device) -> NormEpilogue:
    weight = (torch.rand(width, device=device) + 0.5).to(dtype)
    out = poison(torch.empty(residual.shape, dtype=dtype, device=device))
    counter = torch.zeros(1, dtype=torch.int32, device=device)
    return NormEpilogue(residual=residual, weight=weight, out=out, counter=counter, eps=EPS)


@pytest.mark.parametrize(
    ("rows", "width", "in_features", "dtype"),
    [(1, 100, 70, torch.float32), (1, 96, 64, torch.bfloat16), (3, 48, 40, torch.bfloat16)],
)
def test_gemv_norm_epilogue_matches_reference(device, rows, width, in_features, dtype):
    x = torch.randn(rows, in_features, device=device).to(dtype)
    weight = torch.randn(width, in_features, device=device).to(dtype)
    residual = torch.randn(rows, width, device=device).to(dtype)
    start = residual.clone()
    epilogue = epilogue_for(residual, width, dtype, device)
    # Several strips (block_n 16) so the last ticket is not the only program.
    y = poison(torch.empty(rows, width, dtype=dtype, device=device))
    got = gemv_add_rmsnorm(x, weight, epilogue, config=GemvConfig(block_n=16, block_k=32), y=y)
    assert got.data_ptr() == epilogue.out.data_ptr()
    # The reference on the projection as the kernel stored it (its own fp32 sums: test_gemv covers them).
    assert_close("y", y, gemv_naive(x, weight), atol=3e-2, rtol=2e-2)
    want, want_res = epilogue_add_rmsnorm_naive(y, start, epilogue.weight, EPS, dtype)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    assert_close("normed", got, want, atol=tol, rtol=tol)
    assert_close("residual", residual, want_res, atol=tol, rtol=tol)
    assert int(epilogue.counter.item()) == 0, "the last program must re-arm the counter"


def test_gemv_norm_epilogue_equals_gemv_then_add_rmsnorm(device):
    # The switch's promise: the same roundings as the separate launches (one chunk, interpreter: bit for bit).
    x = torch.randn(1, 64, device=device, dtype=torch.bfloat16)
    weight = torch.randn(80, 64, device=device, dtype=torch.bfloat16)
    residual = torch.randn(1, 80, device=device, dtype=torch.bfloat16)
    config = GemvConfig(block_n=8, block_k=32)
    norm_weight = torch.rand(80, device=device, dtype=torch.bfloat16) + 0.5
    separate_res = residual.clone()
    separate, _ = add_rmsnorm(
        gemv(x, weight, config=config), separate_res, norm_weight, EPS, residual_out=separate_res
    )
    epilogue = NormEpilogue(
        residual=residual,
        weight=norm_weight,
        out=torch.empty_like(residual),
        counter=torch.zeros(1, dtype=torch.int32, device=device),
        eps=EPS,
    )
    fused = gemv_add_rmsnorm(x, weight, epilogue, config=config)
    if device.type == "cpu":
        assert torch.equal(fused, separate) and torch.equal(residual, separate_res)
    else:
        # Other warps reduce sum(r^2) in another order: rstd may differ in its last fp32 bit.
        assert_close("normed", fused, separate, atol=1e-2, rtol=8e-3)
        assert torch.equal(residual, separate_res)


def one_ulp_off_share(got: torch.Tensor, want: torch.Tensor) -> float:
    """Share of elements that differ; asserts none differs by more than one ulp of got's dtype."""
    finfo = torch.finfo(got.dtype)
    diff = (got.double() - want.double()).abs()
    ulp = finfo.eps * want.double().abs().clamp_min(finfo.tiny)
    assert (diff <= ulp * 1.01).all(), f"max diff {diff.max().item():.3e} exceeds one ulp"
    return float((diff > 0).double().mean())


def test_gemv_norm_epilogue_over_several_chunks(device):
    # 1100 = two full 512 chunks and a ragged one: sum(r^2) in another order than add_rmsnorm's, so the
    # residual is bit for bit and the normed row within one bf16 ulp on a small share of its elements.
    width = 1100
    x = torch.randn(1, 64, device=device, dtype=torch.bfloat16)
    weight = torch.randn(width, 64, device=device, dtype=torch.bfloat16)
    residual = torch.randn(1, width, device=device, dtype=torch.bfloat16)
    norm_weight = torch.rand(width, device=device, dtype=torch.bfloat16) + 0.5
    config = GemvConfig(block_n=64, block_k=64)
    separate_res = residual.clone()
    separate, _ = add_rmsnorm(
        gemv(x, weight, config=config), separate_res, norm_weight, EPS, residual_out=separate_res
    )
    epilogue = NormEpilogue(
        residual,
        norm_weight,
        poison(torch.empty_like(residual)),
        torch.zeros(1, dtype=torch.int32, device=device),
        EPS,
    )
    assert epilogue.chunks() == (512, 3)
    fused = gemv_add_rmsnorm(x, weight, epilogue, config=config)
    assert torch.equal(residual, separate_res)
    assert one_ulp_off_share(fused, separate) <= 0.01


def test_gemv_norm_epilogue_reruns_with_the_rearmed_counter(device):
    # A CUDA-graph replay reuses the counter: the second call must norm again, on the updated residual.
    x = torch.randn(1, 32, device=device)
    weight = torch.randn(64, 32, device=device)
    residual = torch.randn(1, 64, device=device)
    epilogue = epilogue_for(residual, 64, torch.float32, device)
    config = GemvConfig(block_n=16, block_k=32)
    for _ in range(2):
        start = residual.clone()
        epilogue.out.fill_(float("nan"))
        gemv_add_rmsnorm(x, weight, epilogue, config=config)
        want, want_res = epilogue_add_rmsnorm_naive(
            gemv_naive(x, weight), start, epilogue.weight, EPS, torch.float32
        )
        assert_close("normed", epilogue.out, want, atol=1e-5, rtol=1e-5)
        assert_close("residual", residual, want_res, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    ("field", "bad", "match"),
    [
        ("residual", torch.zeros(1, 9), "residual"),
        ("weight", torch.ones(7), "weight"),
        ("counter", torch.zeros(1, dtype=torch.int64), "counter"),
    ],
)
def test_gemv_norm_epilogue_rejects_mismatch(field, bad, match):
    ok = dict(
        residual=torch.zeros(1, 8),
        weight=torch.ones(8),
        out=torch.zeros(1, 8),
        counter=torch.zeros(1, dtype=torch.int32),
        eps=EPS,
    )
    ok[field] = bad
    with pytest.raises(KernelInputError, match=match):
        gemv_add_rmsnorm(torch.randn(1, 4), torch.randn(8, 4), NormEpilogue(**ok))


# The MoE layer's output launch (the experts, split-K fp32 atomics into y; the unfused down launch) with
# the next add + RMSNorm in its last program: y and the norm vs moe_naive and the reference.
SMALL_RULE = RoutingRule(top_k=3, n_group=4, topk_group=2, scale=2.5)
MOE_CASES = [
    ("fused", FusedMoEConfig(block_i=16, block_d=32, block_dout=32)),
    ("deep", FusedMoEConfig(block_i=16, block_d=32, block_dout=32, deep_experts=True, deep_block_i=16)),
    ("early_shared", FusedMoEConfig(block_i=16, block_d=32, block_dout=32, early_shared=True)),
    ("routing_in_experts", FusedMoEConfig(block_i=16, block_d=32, block_dout=32, routing_site="experts")),
    ("unfused", None),
]


@pytest.mark.parametrize(("name", "config"), MOE_CASES, ids=[case[0] for case in MOE_CASES])
@pytest.mark.parametrize("rows", [1, 2])
def test_moe_norm_epilogue_matches_reference(device, name, config, rows):
    torch.manual_seed(rows)
    hidden, inter = 48, 40
    weights = make_weights(12, hidden, inter, device, torch.float32, limits=(0.0, 5.0))
    x = torch.randn(rows, hidden, device=device)
    start = torch.randn(rows, hidden, device=device).to(torch.bfloat16)
    residual = start.clone()
    epilogue = epilogue_for(residual, hidden, torch.bfloat16, device)
    if config is None:
        y = moe_unfused(x, weights, SMALL_RULE, epilogue=epilogue)
    else:
        y = moe_fused(x, weights, SMALL_RULE, config=config, epilogue=epilogue)
    assert_close("y", y, moe_naive(x, weights, SMALL_RULE), atol=1e-4, rtol=1e-4)
    want, want_res = epilogue_add_rmsnorm_naive(y, start, epilogue.weight, EPS, torch.bfloat16)
    assert_close("normed", epilogue.out, want, atol=2e-2, rtol=2e-2)
    assert_close("residual", residual, want_res, atol=1e-2, rtol=8e-3)
    assert int(epilogue.counter.item()) == 0, "the last program must re-arm the counter"
    # The same numbers add_rmsnorm gives on this y (one chunk, interpreter: bit for bit).
    separate_res = start.clone()
    separate, _ = add_rmsnorm(
        y, separate_res, epilogue.weight, EPS, out=torch.empty_like(start), residual_out=separate_res
    )
    if device.type == "cpu":
        assert torch.equal(epilogue.out, separate) and torch.equal(residual, separate_res)


def test_moe_norm_epilogue_refuses_the_union_launch(device):
    weights = make_weights(12, 32, 16, device, torch.float32)
    x = torch.randn(2, 32, device=device)
    epilogue = epilogue_for(torch.zeros(2, 32, device=device), 32, torch.float32, device)
    with pytest.raises(KernelInputError, match="union"):
        moe_fused(x, weights, SMALL_RULE, config=FusedMoEConfig(expert_union=True), epilogue=epilogue)
