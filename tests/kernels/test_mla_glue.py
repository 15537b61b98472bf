"""Absorbed-MLA head products (mla_q_absorb, mla_out_gate) vs the PyTorch ops they replace (naive.py)."""

from __future__ import annotations

import pytest
import torch
from bubblescope.kernels.gemv import KernelInputError
from bubblescope.kernels.mla_glue import (
    MLAGlueConfig,
    mla_out_gate,
    mla_out_gate_naive,
    mla_q_absorb,
    mla_q_absorb_naive,
)

from tests.kernels.helpers import assert_close, poison
from tests.kernels.test_kernels_gpu import run_mode

# (heads, nope, rope, latent, value, config): the second shape is ragged on every axis; the explicit
# small tiles put several programs on each head (masked last tiles) even in the interpreter.
SHAPES = [
    (4, 16, 8, 32, 16, None),
    (3, 12, 8, 40, 24, MLAGlueConfig(block_r=16, block_v=8)),
]


def mla_weights(heads: int, nope: int, latent: int, value: int, make) -> tuple[torch.Tensor, torch.Tensor]:
    """(w_uk [H, nope, r], w_uv_t [H, r, v]) as the model's views of one kv_b_proj weight (packing.py)."""
    # [H * (nope + v), r] -> [H, nope + v, r]
    kv_b = make(heads * (nope + value), latent).unflatten(0, (heads, -1))
    w_uk, w_uv = kv_b.split([nope, value], dim=1)
    return w_uk, w_uv.transpose(1, 2)


def random_inputs(device, heads, nope, rope, latent, value, dtype):
    """Random q (fp32 projection rows, as a strided view), weights, o_latent and gate logits."""

    def make(*shape):
        return (torch.randn(*shape, device=device) / shape[-1] ** 0.5).to(dtype)

    w_uk, w_uv_t = mla_weights(heads, nope, latent, value, make)
    # q is a view of the fused projection row: [H, nope + rope] with row stride nope + rope.
    proj = torch.randn(1, heads * (nope + rope) + heads, device=device)
    q = proj[0, : heads * (nope + rope)].view(heads, nope + rope)
    gate = proj[:, heads * (nope + rope) :]
    o_latent = torch.randn(1, heads, latent, device=device).to(dtype)
    return q, w_uk, w_uv_t, o_latent, gate


@pytest.mark.parametrize(("heads", "nope", "rope", "latent", "value", "config"), SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_kernels_match_naive_on_random_inputs(device, heads, nope, rope, latent, value, config, dtype):
    q, w_uk, w_uv_t, o_latent, gate = random_inputs(device, heads, nope, rope, latent, value, dtype)
    # fp32: summation order only; bf16: one rounding of a different fp32 sum may land one ulp away.
    tol = 2e-5 if dtype == torch.float32 else 1e-2
    q_latent = poison(torch.empty(1, heads, latent, dtype=dtype, device=device))
    mla_q_absorb(q, w_uk, config=config, out=q_latent)
    assert_close("q_absorb", q_latent, mla_q_absorb_naive(q, w_uk), atol=tol, rtol=tol)
    gated = poison(torch.empty(1, heads * value, dtype=dtype, device=device))
    mla_out_gate(o_latent, w_uv_t, gate, config=config, out=gated)
    assert_close("out_gate", gated, mla_out_gate_naive(o_latent, w_uv_t, gate), atol=tol, rtol=tol)


def integer_inputs(device, heads=4, nope=16, rope=8, latent=32, value=16):
    """bf16 inputs whose products and sums are exact in fp32 (any summation order gives the same fp32
    value), so kernel and naive must agree bit for bit; the fp32 query holds half-integers up to 150,
    which bf16 rounds above 128, and the sums exceed bf16's 8-bit mantissa."""

    def make(*shape):
        return torch.randint(-64, 65, shape, device=device).to(torch.bfloat16)

    w_uk, w_uv_t = mla_weights(heads, nope, latent, value, make)
    q = torch.randint(-300, 301, (heads, nope + rope), device=device).float() / 2
    o_latent = make(1, heads, latent)
    gate = torch.randn(1, heads, device=device)
    return q, w_uk, w_uv_t, o_latent, gate


def exact_heads_out(o_latent: torch.Tensor, w_uv_t: torch.Tensor) -> torch.Tensor:
    """[H, v] fp32 o_latent @ W_UV^T per head, summed in fp64 (exact for integer_inputs)."""
    return torch.einsum("hr,hrv->hv", o_latent[0].double(), w_uv_t.double()).float()


# The references below sum in fp64 rather than through torch.bmm: on a GPU cuBLAS may reduce bf16
# products in reduced precision (torch's allow_bf16_reduced_precision_reduction), which is not the
# rounding rule under test. The sigmoid stays torch's, on the test's device.
def test_q_absorb_rounds_the_query_like_the_torch_path(device):
    q, w_uk, *_ = integer_inputs(device)
    nope = w_uk.shape[1]
    want = torch.einsum("hn,hnr->hr", q[:, :nope].to(torch.bfloat16).double(), w_uk.double())
    want = want.to(torch.bfloat16).view(1, *want.shape)
    got = mla_q_absorb(q, w_uk)
    assert torch.equal(got, want), f"{int((got != want).sum())}/{got.numel()} elements differ"
    # The check can fail: the same product on the unrounded fp32 query gives other bf16 values.
    unrounded = torch.einsum("hn,hnr->hr", q[:, :nope].double(), w_uk.double()).to(torch.bfloat16)
    assert not torch.equal(unrounded.view_as(want), want)


def test_out_gate_rounds_the_product_before_the_gate_like_the_torch_path(device):
    _, _, w_uv_t, o_latent, gate = integer_inputs(device)
    product = exact_heads_out(o_latent, w_uv_t)
    weights = torch.sigmoid(gate[0])[:, None]
    want = (product.to(torch.bfloat16).float() * weights).to(torch.bfloat16).view(1, -1)
    got = mla_out_gate(o_latent, w_uv_t, gate)
    assert torch.equal(got, want), f"{int((got != want).sum())}/{got.numel()} elements differ"
    # The check can fail: gating the fp32 product without the intermediate rounding differs.
    single_rounding = (product * weights).to(torch.bfloat16).view_as(want)
    assert not torch.equal(single_rounding, want)


def test_gate_sigmoid_matches_torch_in_fp32(device):
    # fp32 throughout with exact products: the only rounding left is sigmoid and one multiply, so any
    # difference is the sigmoid's. A GPU (libdevice expf + IEEE division, PyTorch's CUDA formula) must
    # match bit for bit; the interpreter's numpy exp and PyTorch's CPU sigmoid differ by an ulp at times.
    _, _, w_uv_t, o_latent, _ = integer_inputs(device)
    gate = torch.linspace(-12, 12, o_latent.shape[1], device=device).view(1, -1)
    w32, o32 = w_uv_t.float(), o_latent.float()
    want = (exact_heads_out(o32, w32) * torch.sigmoid(gate[0])[:, None]).view(1, -1)
    got = mla_out_gate(o32, w32, gate)
    if device.type == "cuda":
        assert torch.equal(got, want), f"max abs diff {(got - want).abs().max().item():.3e}"
    else:
        assert_close("gate fp32", got, want, atol=0.0, rtol=2.5e-7)


def test_glue_rejects_bad_inputs_with_one_line_errors():
    w_uk, w_uv_t = mla_weights(4, 16, 32, 16, lambda *s: torch.randn(*s))
    with pytest.raises(KernelInputError, match=r"mla_q_absorb: q must be \[4, >= 16\]"):
        mla_q_absorb(torch.randn(4, 8), w_uk)
    with pytest.raises(KernelInputError, match="mla_q_absorb: q and w_uk need a contiguous last dimension"):
        mla_q_absorb(torch.randn(24, 4).t(), w_uk)
    with pytest.raises(KernelInputError, match=r"mla_out_gate: o_latent must be \[1, 4, 32\]"):
        mla_out_gate(torch.randn(1, 4, 16), w_uv_t, torch.randn(1, 4))
    with pytest.raises(KernelInputError, match="mla_out_gate: gate must hold 4 head logits"):
        mla_out_gate(torch.randn(1, 4, 32), w_uv_t, torch.randn(1, 3))
    with pytest.raises(KernelInputError, match="mla_out_gate: out must be contiguous"):
        mla_out_gate(torch.randn(1, 4, 32), w_uv_t, torch.randn(1, 4), out=torch.empty(1, 64).half())
    with pytest.raises(KernelInputError, match="block_r must be a power of two"):
        mla_q_absorb(torch.randn(4, 24), w_uk, config=MLAGlueConfig(block_r=48))


def ordered_bits(values: torch.Tensor) -> torch.Tensor:
    """bf16 values as int32 in value order: adjacent bf16 values differ by 1."""
    bits = values.contiguous().view(torch.int16).to(torch.int32)
    return torch.where(bits < 0, -(bits & 0x7FFF), bits)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["eager", "pdl", "graph", "graph_pdl"])
def test_glue_at_ling_shapes_in_every_launch_mode(mode):
    """32 heads, nope 128, latent 512, v 128 (ling3-flash), bf16: eager, PDL, CUDA graph, graph + PDL.
    Against the rule summed in fp64: the fp32 sums' order may move the first rounding by one ulp, rarely,
    and the gate multiply can carry that into a lower binade, where it is two ulps of the result
    (H200 2026-12-01: out_gate 2 ulps on 0.02 % of the elements in one of four modes)."""
    q, w_uk, w_uv_t, o_latent, gate = random_inputs("cuda", 32, 128, 64, 512, 128, torch.bfloat16)
    q_latent = torch.empty(1, 32, 512, dtype=torch.bfloat16, device="cuda")
    gated = torch.empty(1, 32 * 128, dtype=torch.bfloat16, device="cuda")

    def launch(pdl: bool) -> None:
        mla_q_absorb(q, w_uk, use_pdl=pdl, out=q_latent)
        mla_out_gate(o_latent, w_uv_t, gate, use_pdl=pdl, out=gated)

    poison(q_latent)
    poison(gated)
    run_mode(mode, launch, (q_latent, gated))
    exact_q = torch.einsum("hn,hnr->hr", q[:, :128].to(torch.bfloat16).double(), w_uk.double())
    exact_heads = torch.einsum("hr,hrv->hv", o_latent[0].double(), w_uv_t.double()).to(torch.bfloat16)
    exact_gated = (exact_heads.float() * torch.sigmoid(gate[0])[:, None]).to(torch.bfloat16)
    for name, got, want in (
        ("q_absorb", q_latent, exact_q.to(torch.bfloat16).view(1, 32, 512)),
        ("out_gate", gated, exact_gated.view(1, -1)),
    ):
        assert not torch.isnan(got.float()).any(), f"{name} {mode}: unwritten outputs"
        ulps = (ordered_bits(got) - ordered_bits(want)).abs()
        mismatch = float((ulps > 0).float().mean())
        assert int(ulps.max()) <= 2 and mismatch <= 0.01, (
            f"{name} {mode}: max {int(ulps.max())} ulps, {mismatch:.2%}"
        )
