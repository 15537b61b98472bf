"""`kda_norm_in_oproj` on the interpreter: KDA decode without its norm, o_proj with the norm in its prologue.

Each kernel against its plain reference (kda_heads_naive; gemv_head_norm_naive), and the pair against
what it replaces (kda_decode, then the GEMV), at tiny shapes with V not a power of two included.
"""

from __future__ import annotations

import copy

import pytest
import torch
from bubblescope.kernels.gemv import GemvConfig, KernelInputError, gemv
from bubblescope.kernels.gemv.head_norm_prologue import gemv_head_norm
from bubblescope.kernels.gemv.naive import gemv_head_norm_naive
from bubblescope.kernels.kda_decode import kda_decode
from bubblescope.kernels.kda_decode.heads import KDAHeads, kda_decode_heads
from bubblescope.kernels.kda_decode.naive import kda_heads_naive

from tests.kernels.helpers import assert_close, poison
from tests.kernels.test_kda_decode import make_layer


def slice_sums(heads_out: torch.Tensor, parts: int) -> torch.Tensor:
    """`[B, H, P]` sums of squares of each head's P V-slices of ceil(V / P) columns (the kernels' split)."""
    value_dim = heads_out.shape[-1]
    width = -(-value_dim // parts)
    squares = heads_out.float() ** 2
    return torch.stack([squares[..., p * width : (p + 1) * width].sum(-1) for p in range(parts)], dim=-1)


def gated_rows(heads_out: torch.Tensor, gate: torch.Tensor, o_norm: torch.Tensor) -> torch.Tensor:
    """`[B, H*V]` fp32 o * o_norm * sigmoid(gate): what kda_decode_heads stores, the rstd still to apply."""
    rows = heads_out.float() * o_norm.float() * torch.sigmoid(gate.float().view(heads_out.shape))
    return rows.reshape(heads_out.shape[0], -1)


@pytest.mark.parametrize(
    ("heads", "key_dim", "value_dim", "v_splits"),
    [(2, 16, 16, 1), (3, 12, 20, 1), (2, 16, 16, 4), (3, 12, 20, 3)],
)
@pytest.mark.parametrize("early_ticket", [True, False])
def test_kda_decode_heads_matches_naive_over_steps(device, heads, key_dim, value_dim, v_splits, early_ticket):
    """Gated un-normed rows, slice sums of squares and every state, two tokens in a row; the ticket that
    elects the q/k conv shifter taken early (the default) or after the math."""
    activations, weights, state = make_layer(1, heads, key_dim, value_dim, device)
    bare = {name: tensor for name, tensor in activations.items() if name != "gate"}
    want_state = copy.deepcopy(state)
    for _ in range(2):
        want = kda_heads_naive(**bare, weights=weights, state=want_state)
        got = KDAHeads.allocate(1, heads, value_dim, v_splits, device)
        poison(got.out), poison(got.sumsq)
        kda_decode_heads(
            **activations,
            weights=weights,
            state=state,
            heads=got,
            v_splits=v_splits,
            early_ticket=early_ticket,
        )
        want_rows = gated_rows(want, activations["gate"], weights.o_norm)
        assert_close("heads.out", got.out, want_rows, 1e-4, 1e-4)
        assert_close("heads.sumsq", got.sumsq, slice_sums(want, v_splits), 1e-4, 1e-4)
        for name in ("q_conv", "k_conv", "v_conv", "recurrent"):
            assert_close(f"state.{name}", getattr(state, name), getattr(want_state, name), 1e-4, 1e-4)


@pytest.mark.parametrize(
    ("heads", "value_dim", "parts", "out_features", "block_k"),
    [(4, 16, 1, 24, 32), (3, 20, 2, 37, 16), (2, 12, 4, 5, 64)],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gemv_head_norm_matches_naive(device, heads, value_dim, parts, out_features, block_k, dtype):
    """Tiles that cut heads (block_k 16 < V = 20) and that hold several (64 > 2 x 12), N not a multiple."""
    width = heads * value_dim
    x = torch.randn(1, width, device=device)
    gate = torch.randn(1, width, device=device).to(dtype)
    o_norm = (torch.rand(value_dim, device=device) + 0.5).to(dtype)
    weight = torch.randn(out_features, width, device=device).to(dtype)
    sumsq = slice_sums(x.view(1, heads, value_dim), parts)
    rows = gated_rows(x.view(1, heads, value_dim), gate, o_norm)
    out = poison(torch.empty(1, out_features, device=device, dtype=dtype))
    config = GemvConfig(block_n=4, block_k=block_k)
    gemv_head_norm(rows, sumsq, weight, out_dtype=dtype, eps=1e-6, config=config, out=out)
    want = gemv_head_norm_naive(x, gate, o_norm, weight, eps=1e-6)
    # bf16: y itself is rounded to bf16, so one ulp of the largest output is the scale of a difference.
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    assert_close("gemv_head_norm", out, want, tol * float(want.float().abs().max()), tol)


def test_norm_in_oproj_equals_kda_decode_then_gemv(device):
    """The pair the switch runs against the pair it replaces, 4 V-splits, bf16 activations: o_proj's
    output within bf16 rounding (the normed row is rounded to bf16 in both before the product)."""
    heads, key_dim, value_dim, hidden = 4, 16, 32, 40
    activations, weights, state = make_layer(1, heads, key_dim, value_dim, device, act_dtype=torch.bfloat16)
    o_proj = torch.randn(hidden, heads * value_dim, device=device, dtype=torch.bfloat16) * 0.1
    config = GemvConfig(block_n=8, block_k=64)
    plain_state = copy.deepcopy(state)
    attn = kda_decode(**activations, weights=weights, state=plain_state, v_splits=4)
    want = gemv(attn, o_proj, config=config)
    heads_out = kda_decode_heads(**activations, weights=weights, state=state, v_splits=4)
    got = gemv_head_norm(heads_out.out, heads_out.sumsq, o_proj, config=config)
    assert_close("o_proj", got, want, 2e-2, 2e-2)
    assert_close("state.recurrent", state.recurrent, plain_state.recurrent, 1e-6, 1e-6)


def test_gemv_head_norm_rejects_mismatch():
    x, weight = torch.randn(1, 32), torch.randn(8, 32)
    with pytest.raises(KernelInputError, match="H dividing K=32"):
        gemv_head_norm(x, torch.ones(1, 3, 1), weight)
    with pytest.raises(KernelInputError, match=r"sumsq must be \[1, H, P\]"):
        gemv_head_norm(x, torch.ones(2, 1), weight)
    with pytest.raises(KernelInputError, match="x must be contiguous fp32"):
        gemv_head_norm(x.bfloat16(), torch.ones(1, 2, 1), weight)
