"""KDA decode kernel vs the naive reference: output, conv states and recurrent state."""

from __future__ import annotations

import copy

import pytest
import torch
from bubblescope.kernels.gemv import KernelInputError
from bubblescope.kernels.kda_decode import KDALayerState, KDALayerWeights, kda_decode, kda_decode_naive
from bubblescope.kernels.kda_decode.split_launch import KDASplitWorkspace

from tests.kernels.helpers import assert_close, poison


def make_layer(batch, heads, key_dim, value_dim, device, act_dtype=torch.float32, conv_width=4):
    """Random activations, weights and a non-zero state for one KDA layer."""
    wk, wv = heads * key_dim, heads * value_dim
    activations = {
        "q": torch.randn(batch, wk),
        "k": torch.randn(batch, wk),
        "v": torch.randn(batch, wv),
        "f": torch.randn(batch, wk),
        "b": torch.randn(batch, heads),
        "gate": torch.randn(batch, wv),
    }
    activations = {name: t.to(device, act_dtype) for name, t in activations.items()}
    weights = KDALayerWeights(
        q_conv=torch.randn(wk, conv_width, device=device) * 0.5,
        k_conv=torch.randn(wk, conv_width, device=device) * 0.5,
        v_conv=torch.randn(wv, conv_width, device=device) * 0.5,
        a_log=torch.randn(heads, device=device) * 0.5,
        dt_bias=torch.randn(wk, device=device),
        o_norm=torch.rand(value_dim, device=device) + 0.5,
    )
    state = KDALayerState(
        q_conv=torch.randn(batch, wk, conv_width - 1, device=device).to(act_dtype),
        k_conv=torch.randn(batch, wk, conv_width - 1, device=device).to(act_dtype),
        v_conv=torch.randn(batch, wv, conv_width - 1, device=device).to(act_dtype),
        recurrent=torch.randn(batch, heads, key_dim, value_dim, device=device) * 0.1,
    )
    return activations, weights, state


def check_step(activations, weights, state, atol, rtol, use_pdl=False, **options):
    """Run kernel and reference from the same state; compare output and every updated state."""
    want_state = copy.deepcopy(state)
    want = kda_decode_naive(**activations, weights=weights, state=want_state)
    out = poison(torch.empty_like(want))
    kda_decode(**activations, weights=weights, state=state, out=out, use_pdl=use_pdl, **options)
    assert_close("kda out", out, want, atol, rtol)
    for name in ("q_conv", "k_conv", "v_conv", "recurrent"):
        assert_close(f"state.{name}", getattr(state, name), getattr(want_state, name), atol, rtol)


@pytest.mark.parametrize(("batch", "heads", "key_dim", "value_dim"), [(1, 2, 16, 16), (2, 3, 12, 20)])
def test_kda_decode_matches_naive(device, batch, heads, key_dim, value_dim):
    activations, weights, state = make_layer(batch, heads, key_dim, value_dim, device)
    check_step(activations, weights, state, atol=1e-4, rtol=1e-4)


def test_kda_decode_two_steps_with_strided_views(device):
    """Two consecutive tokens (state carried) with q/k/v as views of one fused projection."""
    activations, weights, state = make_layer(1, 2, 16, 16, device)
    for _ in range(2):
        fused = torch.randn(1, 3 * 32, device=device)
        activations.update(q=fused[:, :32], k=fused[:, 32:64], v=fused[:, 64:])
        check_step(activations, weights, state, atol=1e-4, rtol=1e-4)


def test_kda_decode_rejects_bad_state():
    activations, weights, state = make_layer(1, 2, 16, 16, torch.device("cpu"))
    state.recurrent = state.recurrent.double()
    with pytest.raises(KernelInputError, match="state.recurrent must be one of float32"):
        kda_decode(**activations, weights=weights, state=state)
    activations["b"] = torch.randn(1, 3)
    state.recurrent = state.recurrent.float()
    with pytest.raises(KernelInputError, match=r"b must have shape \[1, 2\]"):
        kda_decode(**activations, weights=weights, state=state)


@pytest.mark.parametrize(("v_splits", "value_dim"), [(2, 16), (4, 20), (3, 16)])
def test_kda_decode_v_split_matches_naive_over_steps(device, v_splits, value_dim):
    """Several programs per head (uneven slices too): three tokens in a row, so the shared q/k conv
    state is shifted exactly once per token and the workspace re-arms itself between calls."""
    activations, weights, state = make_layer(2, 3, 12, value_dim, device)
    workspace = KDASplitWorkspace.allocate(2, 3, value_dim, torch.device(device))
    for _ in range(3):
        activations = {name: torch.randn_like(t) for name, t in activations.items()}
        check_step(activations, weights, state, 1e-4, 1e-4, v_splits=v_splits, workspace=workspace)
    assert not workspace.count.any(), "workspace not re-armed"


def test_kda_decode_rejects_bad_v_splits():
    activations, weights, state = make_layer(1, 2, 16, 16, torch.device("cpu"))
    with pytest.raises(KernelInputError, match="v_splits"):
        kda_decode(**activations, weights=weights, state=state, v_splits=17)
    with pytest.raises(KernelInputError, match="workspace is not for"):
        kda_decode(
            **activations,
            weights=weights,
            state=state,
            v_splits=2,
            workspace=KDASplitWorkspace.allocate(1, 2, 8, torch.device("cpu")),
        )


@pytest.mark.parametrize("v_splits", [1, 2])
def test_kda_decode_state_loaded_after_wait_matches_naive(device, v_splits):
    """prefetch_state=False (state read after gdc_wait; same math) matches the reference too."""
    activations, weights, state = make_layer(1, 2, 12, 20, device)
    check_step(activations, weights, state, 1e-4, 1e-4, v_splits=v_splits, prefetch_state=False)
